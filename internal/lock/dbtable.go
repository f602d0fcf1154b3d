package lock

import (
	"context"
	"crypto/rand"
	"database/sql"
	"time"

	"github.com/stockguard/shop/internal/backoff"
	"github.com/stockguard/shop/internal/db"
)

// DBTableOptions configures DBTable. A nil *DBTableOptions is valid.
type DBTableOptions struct {
	// TTL is the lease: how long a lock outlives a holder that stops
	// renewing it. Default 10s.
	TTL time.Duration
}

// DBTable locks with a row per lock name in the MySQL table locks (see
// internal/db), under a unique index on the name. Acquire inserts the row,
// or deletes an expired one and inserts; the token is the row's
// AUTO_INCREMENT key; the watchdog renews the expiry; release deletes the
// row only if it is still this holder's. Expiry is measured by the
// database's clock alone. See docs/locks.md#dbtable.
type DBTable struct {
	locker
	db  *sql.DB
	ttl time.Duration
}

var _ Locker = (*DBTable)(nil)

// NewDBTable returns a Locker on the locks table of db.
func NewDBTable(db *sql.DB, opts *DBTableOptions) *DBTable {
	d := &DBTable{db: db, ttl: 10 * time.Second}
	if opts != nil && opts.TTL > 0 {
		d.ttl = opts.TTL
	}
	d.locker = remote("dbtable", d)
	return d
}

const (
	dbInsert = `INSERT INTO locks (name, owner, expires_at)
		VALUES (?, ?, UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND)`
	dbTakeOver = `DELETE FROM locks WHERE name = ? AND expires_at <= UTC_TIMESTAMP(6)`
	dbRenew    = `UPDATE locks SET expires_at = UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND
		WHERE token = ? AND owner = ? AND expires_at > UTC_TIMESTAMP(6)`
	dbRelease = `DELETE FROM locks WHERE token = ? AND owner = ?`
)

func (d *DBTable) grant(ctx context.Context, name string, wait bool) (grant, error) {
	return poll(ctx, wait, backoff.Limit, func(ctx context.Context) (grant, error) {
		return d.try(ctx, name)
	})
}

func (d *DBTable) try(ctx context.Context, name string) (grant, error) {
	owner := rand.Text()
	start := time.Now()
	ttl := d.ttl.Microseconds()
	res, err := d.db.ExecContext(ctx, dbInsert, name, owner, ttl)
	if db.IsDuplicate(err) {
		if taken, err := affected(d.db.ExecContext(ctx, dbTakeOver, name)); err != nil || !taken {
			return grant{}, contended(err)
		}
		res, err = d.db.ExecContext(ctx, dbInsert, name, owner, ttl)
	}
	if db.IsDuplicate(err) || db.IsRetryable(err) {
		// InnoDB may pick one of several inserts of the same name as a
		// deadlock victim: one more contender that did not win.
		return grant{}, ErrLocked
	}
	if err != nil {
		return grant{}, err
	}
	token, err := res.LastInsertId()
	if err != nil {
		return grant{}, err
	}
	return grant{
		token: token,
		release: func(ctx context.Context) error {
			// InnoDB may pick the release as the victim of a deadlock with
			// another instance's insert or takeover, which lock the name's
			// entry before the row: it changed nothing, and runs again. A
			// row left behind would keep everyone out until it expired.
			for attempt := 0; ; attempt++ {
				err := heldRow(affected(d.db.ExecContext(ctx, dbRelease, token, owner)))
				if !db.IsRetryable(err) || backoff.Wait(ctx, attempt) != nil {
					return err
				}
			}
		},
		renew: renewal(d.ttl, start, func(ctx context.Context) error {
			return heldRow(affected(d.db.ExecContext(ctx, dbRenew, ttl, token, owner)))
		}),
	}, nil
}

// affected reports whether a statement changed a row.
func affected(res sql.Result, err error) (bool, error) {
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n > 0, err
}

// heldRow turns "no row changed" into ErrNotHeld.
func heldRow(changed bool, err error) error {
	if err == nil && !changed {
		return ErrNotHeld
	}
	return err
}

// contended returns ErrLocked for no error or a deadlock, or err.
func contended(err error) error {
	if err == nil || db.IsRetryable(err) {
		return ErrLocked
	}
	return err
}
