package testinfra

import (
	"context"
	"database/sql"
	"fmt"
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
// database with a random name, created now and dropped at cleanup. Under
// -short it returns instead the DSN of a fresh SQLite file, which starts
// with db.SQLitePrefix (see Embedded).
func MySQL(t testing.TB) string {
	t.Helper()
	if Embedded() {
		return sqliteDSN(t)
	}
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
