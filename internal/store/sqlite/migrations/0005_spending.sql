-- What a principal spent on models (store.Spending) is summed from the
-- usage events of the threads it owns. These indexes make that a probe per
-- thread of the principal's, reading only usage events: the partial index
-- holds one entry per model call, and costs appends of other events
-- nothing. It holds the two numbers summed as well, so the sum is read
-- from the index alone, without visiting the events' rows (Spent uses the
-- same expressions).

CREATE INDEX thread_owners_principal ON thread_owners (principal, thread);

CREATE INDEX events_usage ON events (thread, time, json_extract(data, '$.total_tokens'), json_extract(data, '$.cost'))
WHERE type = 'usage';
