package mariadb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"time"
)

// A primary and its replica, as an operator sets them up, promotes the
// replica and switches over: each function takes the Admin connections
// of the servers it changes.

// Replicate makes the server behind replica a read-only replica of the
// primary at addr, from the GTID position it has (its own binary log
// included, so that a former primary rejoins where it stopped), and
// starts replication.
func Replicate(ctx context.Context, replica *sql.DB, addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	return run(ctx, replica,
		"SET GLOBAL read_only = ON",
		"STOP SLAVE",
		"RESET SLAVE ALL",
		fmt.Sprintf("CHANGE MASTER TO MASTER_HOST='%s', MASTER_PORT=%s, MASTER_USER='%s', MASTER_PASSWORD='%[3]s', "+
			"MASTER_USE_GTID=current_pos, MASTER_CONNECT_RETRY=1", host, port, Admin),
		"START SLAVE")
}

// SemiSync turns the semi-synchronous wait on or off on a primary: with
// it on, a commit is answered only once a replica has the transaction in
// its relay log (AFTER_SYNC), or after timeout with none, when the
// primary silently goes on asynchronously.
func SemiSync(ctx context.Context, primary *sql.DB, on bool, timeout time.Duration) error {
	return run(ctx, primary,
		fmt.Sprintf("SET GLOBAL rpl_semi_sync_master_timeout = %d", timeout.Milliseconds()),
		fmt.Sprintf("SET GLOBAL rpl_semi_sync_master_enabled = %t", on))
}

// AwaitSemiSync waits until the primary has a semi-synchronous replica
// connected and waits for it.
func AwaitSemiSync(ctx context.Context, primary *sql.DB) error {
	for {
		var clients, status string
		err := primary.QueryRowContext(ctx, "SELECT "+
			"(SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = 'RPL_SEMI_SYNC_MASTER_CLIENTS'), "+
			"(SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = 'RPL_SEMI_SYNC_MASTER_STATUS')").Scan(&clients, &status)
		if err == nil && clients != "0" && status == "ON" {
			return nil
		}
		if err := sleep(ctx, 20*time.Millisecond); err != nil {
			return fmt.Errorf("mariadb: no semi-synchronous replica (clients %s, status %s): %w", clients, status, err)
		}
	}
}

// CatchUp waits until the replica has applied everything the primary has
// in its binary log. MASTER_GTID_WAIT reads the replica's applied
// position alone, which lacks what the replica wrote itself when it was
// primary; gtid_current_pos has both.
func CatchUp(ctx context.Context, primary, replica *sql.DB) error {
	var pos string
	if err := primary.QueryRowContext(ctx, "SELECT @@gtid_binlog_pos").Scan(&pos); err != nil {
		return err
	}
	for {
		var current string
		var waited sql.NullInt64
		err := replica.QueryRowContext(ctx, "SELECT @@gtid_current_pos, MASTER_GTID_WAIT(?, 0.2)", pos).Scan(&current, &waited)
		if err == nil && (current == pos || waited.Int64 == 0 && waited.Valid) {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("mariadb: GTID %s not applied: %w (%s)", pos, errors.Join(err, ctx.Err()), replicationErrors(replica))
		}
		if err := sleep(ctx, 50*time.Millisecond); err != nil {
			return fmt.Errorf("mariadb: GTID %s not applied: %w (%s)", pos, err, replicationErrors(replica))
		}
	}
}

// replicationErrors returns the replica's last errors, for a message.
func replicationErrors(replica *sql.DB) string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	io, err1 := slaveStatus(ctx, replica, "Last_IO_Error")
	applier, err2 := slaveStatus(ctx, replica, "Last_SQL_Error")
	return fmt.Sprintf("receiving: %q, applying: %q %v", io, applier, errors.Join(err1, err2))
}

// Promote makes a replica whose primary is gone or read-only the primary:
// it applies the rest of its relay log (what it received but had not
// applied), stops replicating and takes writes.
func Promote(ctx context.Context, replica *sql.DB) error {
	// The relay log is applied whatever held the applier back.
	if err := run(ctx, replica, "START SLAVE SQL_THREAD"); err != nil {
		return err
	}
	received, err := slaveStatus(ctx, replica, "Gtid_IO_Pos")
	if err != nil {
		return err
	}
	if err := awaitGTID(ctx, replica, received); err != nil {
		return err
	}
	return run(ctx, replica, "STOP SLAVE", "RESET SLAVE ALL", "SET GLOBAL read_only = OFF")
}

// awaitGTID waits until the server has applied pos.
func awaitGTID(ctx context.Context, db *sql.DB, pos string) error {
	wait := 30 * time.Second
	if d, ok := ctx.Deadline(); ok {
		wait = time.Until(d)
	}
	var got int
	if err := db.QueryRowContext(ctx, "SELECT MASTER_GTID_WAIT(?, ?)", pos, wait.Seconds()).Scan(&got); err != nil {
		return err
	}
	if got != 0 {
		return fmt.Errorf("mariadb: GTID %s not applied within %v", pos, wait.Round(time.Millisecond))
	}
	return nil
}

// slaveStatus returns one column of SHOW SLAVE STATUS.
func slaveStatus(ctx context.Context, db *sql.DB, column string) (string, error) {
	rows, err := db.QueryContext(ctx, "SHOW SLAVE STATUS")
	if err != nil {
		return "", err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return "", err
	}
	if !rows.Next() {
		return "", fmt.Errorf("mariadb: not a replica: %w", rows.Err())
	}
	vals := make([]sql.NullString, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	if err := rows.Scan(ptrs...); err != nil {
		return "", err
	}
	for i, c := range cols {
		if c == column {
			return vals[i].String, nil
		}
	}
	return "", fmt.Errorf("mariadb: SHOW SLAVE STATUS has no %s", column)
}

// run runs statements in order on db.
func run(ctx context.Context, db *sql.DB, statements ...string) error {
	for _, s := range statements {
		if _, err := db.ExecContext(ctx, s); err != nil {
			return fmt.Errorf("mariadb: %s: %w", s, err)
		}
	}
	return nil
}

func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}
