package sale

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
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
	status, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	_, rest, _ := bytes.Cut(status, []byte("VmHWM:"))
	line, _, _ := bytes.Cut(rest, []byte("\n"))
	kb, _ := strconv.ParseInt(string(bytes.TrimSuffix(bytes.TrimSpace(line), []byte(" kB"))), 10, 64)
	return kb << 10
}
