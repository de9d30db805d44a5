-- Threads and their append-only event logs. Times are unix microseconds, UTC.

CREATE TABLE threads (
    id       TEXT    NOT NULL PRIMARY KEY,
    last_seq INTEGER NOT NULL,
    created  INTEGER NOT NULL,
    updated  INTEGER NOT NULL
) STRICT, WITHOUT ROWID;

-- Clustered on (thread, seq): a replay reads one thread's events from
-- neighbouring pages instead of chasing rowids across the whole log.
CREATE TABLE events (
    thread TEXT    NOT NULL,
    seq    INTEGER NOT NULL,
    id     TEXT    NOT NULL,
    run    TEXT    NOT NULL,
    type   TEXT    NOT NULL,
    time   INTEGER NOT NULL,
    data   TEXT    NOT NULL, -- the payload as JSON (event.EncodePayload)
    PRIMARY KEY (thread, seq)
) STRICT, WITHOUT ROWID;
