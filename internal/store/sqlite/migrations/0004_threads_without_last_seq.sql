-- Seqs come from the events' primary key: the writer continues each thread
-- from max(seq) of its events (cached between batches, see write.go), and
-- writes threads only when a thread begins. Updating a thread's row on every
-- append cost each commit a page of its own in the WAL: with a message's
-- deltas committed a few times a second, a third of the bytes written.
-- A thread's last seq and when it was last written are read from its last
-- event. last_seq always equalled the thread's max(seq) (one transaction
-- wrote both), so nothing is lost.

ALTER TABLE threads DROP COLUMN last_seq;
ALTER TABLE threads DROP COLUMN updated;
