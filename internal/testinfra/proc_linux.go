package testinfra

import "syscall"

// sysProcAttr puts a server in its own process group, so that signals reach
// all of it, and has the kernel kill it when the test binary dies without
// running its cleanups (a panic, a timeout, ^C).
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
