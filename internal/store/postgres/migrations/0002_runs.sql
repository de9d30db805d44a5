-- Run claims: the active run of each thread, the node that owns it and
-- until when (store.Runs); and the input waiting for each thread's next
-- runs. Leases are timed by the database's clock.

CREATE TABLE runs (
    thread  text COLLATE "C" PRIMARY KEY,
    run     text        NOT NULL,
    node    text        NOT NULL,
    since   timestamptz NOT NULL,
    expires timestamptz NOT NULL
);

CREATE INDEX runs_node ON runs (node);

CREATE TABLE run_queue (
    id          bigserial PRIMARY KEY,
    thread      text COLLATE "C" NOT NULL,
    run         text    NOT NULL,
    message_id  text    NOT NULL,
    text        text    NOT NULL,
    interactive boolean NOT NULL,
    options     json    NOT NULL -- event.RunOptions
);

CREATE INDEX run_queue_thread ON run_queue (thread, id);

-- Runs that a server before this schema left open (it crashed during them)
-- get an expired claim of an unknown node, so that the next server to
-- start ends them in the log like any claim a dead node left behind.
INSERT INTO runs (thread, run, node, since, expires)
SELECT DISTINCT ON (s.thread) s.thread, s.run, 'unknown', s.time, 'epoch'
FROM events s
WHERE s.type = 'run.started'
  AND NOT EXISTS (
    SELECT 1 FROM events e
    WHERE e.thread = s.thread AND e.run = s.run
      AND e.type IN ('run.completed', 'run.failed', 'run.cancelled'))
ORDER BY s.thread, s.seq DESC;
