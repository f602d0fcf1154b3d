//go:build !linux

package loadtest

import (
	"os"
	"syscall"
)

func sysProcAttr() *syscall.SysProcAttr { return nil }

// peakRSS is not measured here: rusage units differ between systems.
func peakRSS(*os.ProcessState) int64 { return 0 }
