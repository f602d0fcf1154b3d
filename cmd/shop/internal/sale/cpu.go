package sale

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/stockguard/shop/internal/backend"
	"github.com/stockguard/shop/internal/config"
	"github.com/stockguard/shop/internal/strategy"
	"github.com/stockguard/shop/loadtest"
)

// What an order costs in CPU, by class of process: the shops, the load
// generator (this process), and each server the strategy uses. A meter
// reads every process's CPU time before and after a load; the kernel
// counts it whoever ran it, so the figures hold on a loaded machine where
// throughput does not.

// class is one class of process and the processes found for it.
type class struct {
	name    string
	pids    []int
	missing []string // why some or all of its processes were not found
}

// meter reads the CPU time of every class.
type meter []class

// server is a class of server and the addresses it listens on.
type server struct {
	name  string
	addrs []string
}

// servers are the servers s uses, as cfg names them: the database and
// Redis, which every shop uses, and those of its Needs. The nodes of a
// Redis Cluster are each a class of their own, "redis <addr>", so that the
// CPU per order shows by master. Under Sentinel, SHOP_REDIS_ADDR names
// the Sentinels, whose CPU is shown as theirs.
func servers(cfg config.Config, s strategy.Strategy) []server {
	list := []server{{"mysql", []string{dsnAddr(cfg.MySQLDSN)}}}
	switch addrs := cfg.RedisAddrs(); {
	case cfg.RedisSentinel != "": // the Sentinels' own CPU: the master is theirs to name
		list = append(list, server{"redis sentinels", addrs})
	case len(addrs) > 1:
		for _, a := range addrs {
			list = append(list, server{"redis " + a, []string{a}})
		}
	default:
		list = append(list, server{"redis", addrs})
	}
	for _, n := range s.Needs {
		switch n {
		case backend.Redlock:
			list = append(list, server{"redlock", cfg.RedlockAddrs})
		case backend.ZooKeeper:
			list = append(list, server{"zookeeper", cfg.ZKAddrs})
		case backend.Etcd:
			list = append(list, server{"etcd", cfg.EtcdAddrs})
		}
	}
	return list
}

// newMeter finds the processes of each class: shops are the shops' pids,
// the load generator is this process, and each server's are those that
// listen on its addresses on this machine.
func newMeter(shops []int, list []server) meter {
	m := meter{{name: "shops", pids: shops}, {name: "load generator", pids: []int{os.Getpid()}}}
	for _, s := range list {
		c := class{name: s.name}
		for _, addr := range s.addrs {
			pids, err := listening(addr)
			if err != nil {
				c.missing = append(c.missing, err.Error())
			}
			for _, pid := range pids {
				if !slices.Contains(c.pids, pid) {
					c.pids = append(c.pids, pid)
				}
			}
		}
		m = append(m, c)
	}
	return m
}

// reading is each process's CPU time so far, by class, in the meter's
// order; an error where it could not be read.
type reading [][]cpuTime

type cpuTime struct {
	t   time.Duration
	err error
}

func (m meter) read() reading {
	r := make(reading, len(m))
	for i, c := range m {
		r[i] = make([]cpuTime, len(c.pids))
		for j, pid := range c.pids {
			r[i][j].t, r[i][j].err = procCPU(pid)
		}
	}
	return r
}

// perOrder is what each class used between before and after, over orders.
func (m meter) perOrder(before, after reading, orders int) []loadtest.ClassCPU {
	out := make([]loadtest.ClassCPU, len(m))
	for i, c := range m {
		cc := loadtest.ClassCPU{Class: c.name}
		missing := c.missing
		for j, pid := range c.pids {
			if err := cmpErr(before[i][j].err, after[i][j].err); err != nil {
				missing = append(missing, fmt.Sprintf("process %d: %v", pid, err))
				continue
			}
			cc.Processes++
			cc.Seconds += (after[i][j].t - before[i][j].t).Seconds()
		}
		if orders > 0 {
			cc.PerOrder = cc.Seconds / float64(orders) * 1e6
		}
		cc.Missing = strings.Join(missing, "; ")
		out[i] = cc
	}
	return out
}

func cmpErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// dsnAddr is the host:port a MySQL DSN connects to, or the DSN's own
// address (a socket's path) when it is not TCP.
func dsnAddr(dsn string) string {
	c, err := mysql.ParseDSN(dsn)
	if err != nil {
		return dsn
	}
	return c.Addr
}
