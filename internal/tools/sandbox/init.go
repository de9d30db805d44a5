package sandbox

// init makes every binary that links this package its own sandbox
// launcher (see Main): the server's, and the test binaries of every
// package that builds a server or runs a tool, whatever their main or
// TestMain does. In any other process Main returns at once.
func init() { Main() }
