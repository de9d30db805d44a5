-- The principal each thread belongs to (store.Owners). Threads from before
-- this schema were made without authentication: they are the anonymous
-- principal's.

CREATE TABLE thread_owners (
    thread    TEXT    NOT NULL PRIMARY KEY,
    principal TEXT    NOT NULL,
    since     INTEGER NOT NULL
) STRICT, WITHOUT ROWID;

INSERT INTO thread_owners (thread, principal, since)
SELECT id, 'anonymous', created FROM threads;
