// Package mariadb runs MariaDB servers of the shop's own on loopback, from
// Debian's binaries (the mariadb-server package): alone, or as a primary
// and its replica. `shop lesson async-failover` starts a pair with it, and
// the tests start theirs through internal/testinfra, which adds what only
// a test needs (pausing, cleanup, an endpoint in front of the pair).
//
// Every server has two users, made at each start and never replicated:
// Admin, with every privilege, and Shop, with the privileges a shop needs
// and neither SUPER nor READ ONLY ADMIN, so that read_only binds it as it
// binds a production application's user.
package mariadb

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"

	"github.com/go-sql-driver/mysql"

	"github.com/stockguard/shop/internal/freeport"
)

// The users every server has, and their passwords.
const (
	Admin = "test"
	Shop  = "shop"
)

// shopPrivileges are Shop's: what the shop's migrations and order path
// use, and no administrative privilege.
const shopPrivileges = "SELECT, INSERT, UPDATE, DELETE, CREATE, DROP, INDEX, ALTER, CREATE TEMPORARY TABLES, " +
	"LOCK TABLES, EXECUTE, CREATE VIEW, SHOW VIEW, CREATE ROUTINE, ALTER ROUTINE, TRIGGER, REFERENCES"

// ErrNotInstalled is returned when MariaDB's server binaries are missing.
var ErrNotInstalled = errors.New("mariadb: mariadbd and mariadb-install-db not found on PATH, in /usr/sbin or /usr/bin: install the Debian package mariadb-server")

// Find returns the path of one of MariaDB's binaries, looked up on PATH
// and in the Debian directories that a non-root PATH may lack.
func Find(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	for _, dir := range []string{"/usr/sbin", "/usr/bin"} {
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%w (%s)", ErrNotInstalled, name)
}

// Installed reports whether the server binaries are there.
func Installed() bool {
	_, err1 := Find("mariadbd")
	_, err2 := Find("mariadb-install-db")
	return err1 == nil && err2 == nil
}

// Node is one server's files and command line.
type Node struct {
	Dir  string // its files: data, tmp, socket, init file
	Addr string // the loopback host:port it listens on
	// ServerID, when not 0, gives the server binary logs and GTIDs, so
	// that it can be a primary or a replica (see Replicate).
	ServerID int
	// Args are added to its command line.
	Args []string
}

// NewNode returns a node in dir, on a free loopback port.
func NewNode(dir string, serverID int) (Node, error) {
	addr, err := freeport.Addr()
	if err != nil {
		return Node{}, err
	}
	return Node{Dir: dir, Addr: addr, ServerID: serverID}, nil
}

// Data is the node's data dir.
func (n Node) Data() string { return filepath.Join(n.Dir, "data") }

// DSN returns a go-sql-driver DSN for user on the node, with database db
// ("" for none) and parseTime.
func (n Node) DSN(user, db string) string {
	cfg := mysql.NewConfig()
	cfg.User, cfg.Passwd, cfg.Net, cfg.Addr, cfg.DBName, cfg.ParseTime = user, user, "tcp", n.Addr, db, true
	return cfg.FormatDSN()
}

// Install makes the node's data dir with mariadb-install-db, and its init
// file, which makes the users at every start.
func (n Node) Install(ctx context.Context) error {
	install, err := Find("mariadb-install-db")
	if err != nil {
		return err
	}
	me, err := user.Current()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(n.Dir, "tmp"), 0o700); err != nil {
		return err
	}
	// The server's root logs in over the Unix socket as whoever runs it;
	// Admin and Shop log in over TCP. The users are made unlogged: each
	// server has its own, and a replica's binary log holds only what its
	// primary sent.
	init := "SET SESSION sql_log_bin = 0;\n" +
		fmt.Sprintf("CREATE USER IF NOT EXISTS '%s'@'127.0.0.1' IDENTIFIED BY '%[1]s';\nGRANT ALL ON *.* TO '%[1]s'@'127.0.0.1';\n", Admin) +
		fmt.Sprintf("CREATE USER IF NOT EXISTS '%s'@'127.0.0.1' IDENTIFIED BY '%[1]s';\nGRANT %s ON *.* TO '%[1]s'@'127.0.0.1';\n", Shop, shopPrivileges)
	if err := os.WriteFile(filepath.Join(n.Dir, "init.sql"), []byte(init), 0o600); err != nil {
		return err
	}
	out, err := exec.CommandContext(ctx, install, "--no-defaults", "--user="+me.Username, "--datadir="+n.Data(),
		"--tmpdir="+filepath.Join(n.Dir, "tmp"), "--auth-root-authentication-method=socket",
		"--auth-root-socket-user="+me.Username, "--skip-test-db").CombinedOutput()
	if err != nil {
		return fmt.Errorf("mariadb-install-db: %w\n%s", err, out)
	}
	return nil
}

// Command returns a command that runs the node's server: the same at
// every start.
func (n Node) Command() (*exec.Cmd, error) {
	bin, err := Find("mariadbd")
	if err != nil {
		return nil, err
	}
	me, err := user.Current()
	if err != nil {
		return nil, err
	}
	host, port, err := net.SplitHostPort(n.Addr)
	if err != nil {
		return nil, err
	}
	// Small buffers: a private server holds little. Durability stays the
	// default, every commit flushed, so that a kill loses no commit.
	args := []string{"--no-defaults", "--user=" + me.Username, "--datadir=" + n.Data(), "--tmpdir=" + filepath.Join(n.Dir, "tmp"),
		"--socket=" + filepath.Join(n.Dir, "mysqld.sock"), "--bind-address=" + host, "--port=" + port,
		"--skip-name-resolve", "--character-set-server=utf8mb4", "--max-connections=1000",
		"--innodb-buffer-pool-size=32M", "--innodb-log-file-size=16M", "--init-file=" + filepath.Join(n.Dir, "init.sql")}
	if n.ServerID != 0 {
		args = append(args, replicationArgs(n.ServerID)...)
	}
	return exec.Command(bin, append(args, n.Args...)...), nil
}

// replicationArgs make a server either role: binary logs with GTIDs, the
// replica's applied events logged too (so that it can be promoted and
// its old primary replicate from it), semi-synchronous replication loaded
// but off until the pair turns it on, and no replication started at boot.
func replicationArgs(serverID int) []string {
	return []string{"--server-id=" + strconv.Itoa(serverID), "--log-bin=mysql-bin", "--log-slave-updates",
		"--binlog-format=ROW", "--relay-log=relay-bin", "--skip-slave-start",
		"--rpl-semi-sync-master-wait-point=AFTER_SYNC", "--rpl-semi-sync-slave-enabled=ON",
		"--slave-net-timeout=5", "--binlog-cache-size=32K", "--max-binlog-size=64M"}
}
