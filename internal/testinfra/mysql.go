package testinfra

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/wait"
)

var mysqlContainer = onceContainer("mysql:8", "3306/tcp",
	// The image first runs a server on port 0 for its init scripts; wait
	// for the real one.
	wait.ForLog("port: 3306  MySQL Community Server"),
	testcontainers.WithEnv(map[string]string{"MYSQL_ROOT_PASSWORD": "shop"}),
	// Throwaway data: skip the disk.
	testcontainers.WithTmpfs(map[string]string{"/var/lib/mysql": "rw"}),
)

var sharedMySQL = shared{
	name: "MySQL",
	env:  "SHOP_TEST_MYSQL_DSN",
	container: func() (string, error) {
		addr, err := mysqlContainer()
		if err != nil {
			return "", err
		}
		return "root:shop@tcp(" + addr + ")/?parseTime=true", nil
	},
}

// MySQL returns a go-sql-driver DSN (with parseTime=true) for a fresh
// database with a random name, created now and dropped at cleanup.
func MySQL(t testing.TB) string {
	t.Helper()
	cfg, err := mysql.ParseDSN(sharedMySQL.locate(t))
	if err != nil {
		t.Fatalf("testinfra: %s: %v", sharedMySQL.env, err)
	}
	cfg.DBName = ""
	admin := cfg.FormatDSN()
	name := randomName("test_")

	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := execSQL(ctx, admin, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("testinfra: MySQL at %s: %v", cfg.Addr, err)
	}
	cleanup(t, "MySQL at "+cfg.Addr, func(ctx context.Context) error {
		return execSQL(ctx, admin, "DROP DATABASE IF EXISTS "+name)
	})

	cfg.DBName = name
	cfg.ParseTime = true
	return cfg.FormatDSN()
}

// execSQL runs statements on a connection of its own.
func execSQL(ctx context.Context, dsn string, statements ...string) error {
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	for _, s := range statements {
		if _, err := db.ExecContext(ctx, s); err != nil {
			return fmt.Errorf("%s: %w", s, err)
		}
	}
	return nil
}

// mariadbOptions go first on the command lines of both mariadb-install-db
// and mariadbd. --no-defaults, which must come first, keeps the system's
// my.cnf (its socket, its datadir) out. Small InnoDB sizes let several
// servers run at once and start fast.
var mariadbOptions = []string{
	"--no-defaults",
	"--innodb-buffer-pool-size=32M",
	"--innodb-log-file-size=16M",
}

// StartMariaDB starts a private mariadbd on a free loopback port, with a
// fresh data directory whose root user has no password, and a database
// "shop". It is killed at cleanup. Kill then Start keeps every committed
// transaction, as InnoDB's crash recovery promises.
func StartMariaDB(t testing.TB) *Server {
	t.Helper()
	skipShort(t, "mariadbd")
	mariadbd := lookPath(t, "mariadbd", "mariadb-server")
	installDB := lookPath(t, "mariadb-install-db", "mariadb-server")
	dir := t.TempDir()
	datadir := filepath.Join(dir, "data")
	// A Unix socket path must fit in 108 bytes, which t.TempDir may not.
	sockDir, err := os.MkdirTemp("", "mariadb")
	if err != nil {
		t.Fatalf("testinfra: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(sockDir) })

	s := newServer(t, "mariadbd", freeAddr(t), dir, 30*time.Second)
	s.dsn = fmt.Sprintf("root@tcp(%s)/shop?parseTime=true", s.addr)

	var asRoot []string
	if os.Geteuid() == 0 {
		asRoot = []string{"--user=root"} // else mariadbd refuses to run as root
	}
	install := exec.CommandContext(t.Context(), installDB, slices.Concat(mariadbOptions, asRoot,
		[]string{"--datadir=" + datadir, "--auth-root-authentication-method=normal", "--skip-test-db"})...)
	if out, err := install.CombinedOutput(); err != nil {
		t.Fatalf("testinfra: mariadb-install-db: %v\n%s", err, out)
	}

	_, port, _ := net.SplitHostPort(s.addr)
	s.command = func() *exec.Cmd {
		return exec.Command(mariadbd, slices.Concat(mariadbOptions, asRoot, []string{
			"--datadir=" + datadir, "--socket=" + filepath.Join(sockDir, "mysqld.sock"),
			"--bind-address=127.0.0.1", "--port=" + port, "--skip-name-resolve",
			// MySQL 8's default, which --no-defaults would turn into latin1.
			"--character-set-server=utf8mb4",
		})...)
	}
	s.ready = func(ctx context.Context) error {
		return execSQL(ctx, fmt.Sprintf("root@tcp(%s)/", s.addr), "CREATE DATABASE IF NOT EXISTS shop")
	}
	s.Start()
	return s
}
