//go:build !linux

package sale

import "syscall"

func sysProcAttr() *syscall.SysProcAttr { return nil }

// peakRSS is not measured here.
func peakRSS(pid int) int64 { return 0 }
