-- Run claims: the active run of each thread, the node that owns it and
-- until when (store.Runs); and the input waiting for each thread's next
-- runs. Times are unix microseconds, UTC.

CREATE TABLE runs (
    thread  TEXT    NOT NULL PRIMARY KEY,
    run     TEXT    NOT NULL,
    node    TEXT    NOT NULL,
    since   INTEGER NOT NULL,
    expires INTEGER NOT NULL
) STRICT, WITHOUT ROWID;

CREATE TABLE run_queue (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    thread      TEXT    NOT NULL,
    run         TEXT    NOT NULL,
    message_id  TEXT    NOT NULL,
    text        TEXT    NOT NULL,
    interactive INTEGER NOT NULL,
    options     TEXT    NOT NULL -- event.RunOptions as JSON
) STRICT;

CREATE INDEX run_queue_thread ON run_queue (thread, id);

-- Runs that a server before this schema left open (it crashed during them)
-- get an expired claim of an unknown node, so that the next server to
-- start ends them in the log like any claim a dead node left behind.
INSERT OR IGNORE INTO runs (thread, run, node, since, expires)
SELECT s.thread, s.run, 'unknown', s.time, 0
FROM events s
WHERE s.type = 'run.started'
  AND NOT EXISTS (
    SELECT 1 FROM events e
    WHERE e.thread = s.thread AND e.run = s.run
      AND e.type IN ('run.completed', 'run.failed', 'run.cancelled'))
ORDER BY s.thread, s.seq DESC;
