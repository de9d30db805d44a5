-- Seqs come from the events' primary key: an append takes a
-- transaction-scoped advisory lock on each thread it writes and continues
-- from max(seq) of the thread's events (see write.go). threads now only
-- records that a thread exists and when it began; its last seq and when it
-- was last written are read from its last event.
--
-- The columns are dropped rather than left to go stale: a server of the
-- previous version still running on this database fails its appends
-- (column missing) instead of numbering events from a count nobody keeps.
-- Restart every server on the new version. last_seq always equalled the
-- thread's max(seq) (both were written by one statement), so nothing is
-- lost.

ALTER TABLE threads DROP COLUMN last_seq, DROP COLUMN updated;
