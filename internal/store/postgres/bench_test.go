package postgres_test

func cleanupBench() {}
