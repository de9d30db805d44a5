//go:build !linux

package main

import "syscall"

// sysProcAttr: only Linux can tie a child's life to its parent's; the
// loadgen reads /proc, so it measures nothing elsewhere anyway.
func sysProcAttr() *syscall.SysProcAttr { return nil }
