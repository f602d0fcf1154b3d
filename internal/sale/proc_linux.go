package loadtest

import (
	"fmt"
	"strconv"
	"strings"
	"syscall"
)

// sysProcAttr has the kernel kill a shop instance when the process that
// started it dies, so that none is left behind.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// peakRSS returns the largest resident set the running process pid has
// had (VmHWM). Not rusage's ru_maxrss: on Linux a child's count starts from
// the RSS of the parent it was forked from, the bench itself.
func peakRSS(pid int) int64 {
	kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(keyOf(fmt.Sprintf("/proc/%d/status", pid), "VmHWM:")), " kB"), 10, 64)
	return kb << 10
}
