//go:build !linux

package sale

import (
	"errors"
	"runtime"
	"syscall"
	"time"
)

func sysProcAttr() *syscall.SysProcAttr { return nil }

// peakRSS is not measured here.
func peakRSS(pid int) int64 { return 0 }

// errNoProc: the CPU time of other processes is read from Linux's /proc.
var errNoProc = errors.New("not measured on " + runtime.GOOS + ": CPU times are read from Linux's /proc")

func procCPU(int) (time.Duration, error) { return 0, errNoProc }

func listening(string) ([]int, error) { return nil, errNoProc }
