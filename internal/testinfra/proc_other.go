//go:build unix && !linux

package testinfra

import "syscall"

// sysProcAttr puts a server in its own process group, so that signals reach
// all of it. Without Linux's Pdeathsig, a server outlives a test binary that
// dies without running its cleanups.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
