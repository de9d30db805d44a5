package sandbox

// LauncherArg is argv[1] of a launcher, for the test that runs one by hand.
const LauncherArg = launcherArg

// RootOnly is rootOnly, for its test.
var RootOnly = rootOnly
