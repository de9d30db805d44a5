-- What a principal spent on models (store.Spending) is summed from the
-- usage events of the threads it owns. These indexes make that a probe per
-- thread of the principal's, reading only usage events: the partial index
-- holds one entry per model call, and costs appends of other events
-- nothing. (Building it reads the events table once, holding appends back
-- meanwhile: on a large log, expect the first start of this version to
-- take that long.)

CREATE INDEX thread_owners_principal ON thread_owners (principal, thread);

CREATE INDEX events_usage ON events (thread, time) WHERE type = 'usage';
