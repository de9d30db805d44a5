package main

import "syscall"

// sysProcAttr makes a child die with the loadgen, should the loadgen be
// killed before it can stop it.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
