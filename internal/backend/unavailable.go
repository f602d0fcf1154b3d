// Package backend knows the servers the shop depends on: MySQL (or
// MariaDB), Redis, ZooKeeper and etcd. Unavailable is the one place that
// tells their drivers' errors apart: a server that cannot be reached, or
// that dropped a connection mid-statement, from anything else.
package backend

import (
	"database/sql"
	"database/sql/driver"
	"errors"
	"io"
	"net"
	"os"
	"syscall"

	"github.com/go-sql-driver/mysql"
	"github.com/go-zookeeper/zk"
	"github.com/redis/go-redis/v9"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stockguard/shop/internal/db"
)

// Unavailable reports whether err means that a server could not be
// reached, refused the connection, dropped it, is starting or shutting
// down, or takes no writes now (a read-only MySQL server: a replica, or an
// old primary during a switchover). Such a failure is no answer: a
// statement that was sent may or may not have taken effect, and the same
// request may be tried again once the server is back or the endpoint
// reaches the new primary.
func Unavailable(err error) bool {
	if err == nil {
		return false
	}
	var opErr *net.OpError
	var me *mysql.MySQLError
	switch {
	case errors.As(err, &opErr), errors.Is(err, net.ErrClosed), errors.Is(err, os.ErrDeadlineExceeded),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.ECONNABORTED),
		errors.Is(err, syscall.EPIPE), errors.Is(err, syscall.ETIMEDOUT),
		errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return true // any driver's connection
	case errors.Is(err, mysql.ErrInvalidConn), errors.Is(err, driver.ErrBadConn), errors.Is(err, sql.ErrConnDone):
		return true
	case db.IsReadOnly(err):
		return true
	case errors.As(err, &me):
		return mysqlUnavailable[me.Number]
	case errors.Is(err, redis.ErrPoolTimeout), errors.Is(err, redis.ErrClosed),
		redis.IsLoadingError(err), redis.IsReadOnlyError(err), redis.IsClusterDownError(err),
		redis.IsTryAgainError(err), redis.IsMasterDownError(err), redis.IsMaxClientsError(err):
		return true
	case errors.Is(err, zk.ErrNoServer), errors.Is(err, zk.ErrConnectionClosed), errors.Is(err, zk.ErrSessionExpired),
		errors.Is(err, zk.ErrSessionMoved), errors.Is(err, zk.ErrClosing):
		return true
	case errors.Is(err, clientv3.ErrNoAvailableEndpoints):
		return true
	}
	// etcd's errors are gRPC statuses; "no leader" and its timeouts are
	// Unavailable too.
	s, ok := status.FromError(err)
	return ok && s.Code() == codes.Unavailable
}

// mysqlUnavailable are the server's own errors that mean the same.
var mysqlUnavailable = map[uint16]bool{
	1040: true, // ER_CON_COUNT_ERROR: too many connections
	1053: true, // ER_SERVER_SHUTDOWN
	1317: true, // ER_QUERY_INTERRUPTED, as by a shutdown
	1927: true, // ER_CONNECTION_KILLED (MariaDB)
}
