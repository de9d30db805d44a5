-- Threads and their append-only event logs.
--
-- Thread ids use the "C" collation so Threads lists them byte-wise, the same
-- order on every server whatever the database's locale.

CREATE TABLE threads (
    id       text COLLATE "C" PRIMARY KEY,
    last_seq bigint      NOT NULL,
    created  timestamptz NOT NULL,
    updated  timestamptz NOT NULL
);

CREATE TABLE events (
    thread text COLLATE "C" NOT NULL,
    seq    bigint      NOT NULL,
    id     text        NOT NULL,
    run    text        NOT NULL,
    type   text        NOT NULL,
    time   timestamptz NOT NULL,
    -- json, not jsonb: kept byte for byte, so raw arguments replay exactly.
    data   json        NOT NULL,
    PRIMARY KEY (thread, seq)
);
