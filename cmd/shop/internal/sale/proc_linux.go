package sale

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
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

// userHZ is the unit of the CPU times in /proc/<pid>/stat: 1/100 s on
// every architecture Go runs Linux on.
const userHZ = 100

// procCPU returns the CPU time, user and system, that process pid has used
// in all its threads.
func procCPU(pid int) (time.Duration, error) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	return statCPU(stat)
}

// statCPU reads utime and stime, the 14th and 15th fields of a
// /proc/<pid>/stat line. The second, the command's name in parentheses,
// may hold spaces and parentheses itself: the fields are counted from the
// last ')'.
func statCPU(stat []byte) (time.Duration, error) {
	i := bytes.LastIndexByte(stat, ')')
	var fields []string
	if i >= 0 {
		fields = strings.Fields(string(stat[i+1:]))
	}
	if len(fields) < 13 {
		return 0, fmt.Errorf("sale: malformed /proc stat %.60q", stat)
	}
	var ticks int64
	for _, f := range fields[11:13] { // utime, stime: fields 14 and 15, from the state's 3
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("sale: malformed /proc stat: %w", err)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / userHZ, nil
}

// listening returns the processes on this machine that listen on addr:
// the sockets in LISTEN state on its port (/proc/net/tcp and tcp6), and
// the processes whose descriptors hold them (/proc/<pid>/fd). Only the
// owner of a process, or root, can read its descriptors.
func listening(addr string) ([]int, error) {
	host, portText, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("%s: not a TCP address", addr)
	}
	if !local(host) {
		return nil, fmt.Errorf("%s is not on this machine", addr)
	}
	port, err := strconv.ParseUint(portText, 10, 16)
	if err != nil {
		return nil, fmt.Errorf("%s: not a TCP address", addr)
	}
	var inodes []string
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		data, err := os.ReadFile(table)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, err
		}
		inodes = append(inodes, listenInodes(data, uint16(port))...)
	}
	if len(inodes) == 0 {
		return nil, fmt.Errorf("nothing listens on port %d here", port)
	}
	pids := socketOwners(inodes)
	if len(pids) == 0 {
		return nil, fmt.Errorf("the process listening on port %d is not readable here: run the bench as its user, or as root", port)
	}
	return pids, nil
}

// local reports whether host names this machine.
func local(host string) bool {
	if host == "" || host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	if ip == nil {
		ips, err := net.LookupIP(host)
		if err != nil || len(ips) == 0 {
			return false
		}
		ip = ips[0]
	}
	if ip.IsLoopback() || ip.IsUnspecified() {
		return true
	}
	addrs, _ := net.InterfaceAddrs()
	return slices.ContainsFunc(addrs, func(a net.Addr) bool {
		n, ok := a.(*net.IPNet)
		return ok && n.IP.Equal(ip)
	})
}

// listenInodes returns the inodes of the sockets in a /proc/net/tcp table
// that listen on port.
func listenInodes(table []byte, port uint16) []string {
	var inodes []string
	sc := bufio.NewScanner(bytes.NewReader(table))
	sc.Scan() // the header
	for sc.Scan() {
		// sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
		f := strings.Fields(sc.Text())
		if len(f) < 10 || f[3] != "0A" { // 0A: LISTEN
			continue
		}
		_, p, _ := strings.Cut(f[1], ":")
		if n, err := strconv.ParseUint(p, 16, 16); err == nil && uint16(n) == port {
			inodes = append(inodes, f[9])
		}
	}
	return inodes
}

// socketOwners returns the processes that hold a socket of one of inodes.
func socketOwners(inodes []string) []int {
	want := make(map[string]bool, len(inodes))
	for _, in := range inodes {
		want["socket:["+in+"]"] = true
	}
	fds, _ := filepath.Glob("/proc/[0-9]*/fd/*")
	var pids []int
	for _, fd := range fds {
		if target, err := os.Readlink(fd); err == nil && want[target] {
			pid, _ := strconv.Atoi(strings.Split(fd, "/")[2])
			if !slices.Contains(pids, pid) {
				pids = append(pids, pid)
			}
		}
	}
	return pids
}
