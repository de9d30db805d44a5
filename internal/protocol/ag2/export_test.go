package ag2

// WatchHistoryWaits has h call f whenever a client's message waits for
// its socket to project the chat's history (session.projected).
func WatchHistoryWaits(h *Handler, f func()) { h.waitingForHistory = f }
