package sqlite_test

func cleanupBench() {}
