-- The principal each thread belongs to (store.Owners). Threads from before
-- this schema were made without authentication: they are the anonymous
-- principal's.

CREATE TABLE thread_owners (
    thread    text COLLATE "C" PRIMARY KEY,
    principal text        NOT NULL,
    since     timestamptz NOT NULL
);

INSERT INTO thread_owners (thread, principal, since)
SELECT id, 'anonymous', created FROM threads;
