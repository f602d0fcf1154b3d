-- The schema as the shop made it before versioned migrations: a database
-- made then is adopted at this version (internal/db/adopt.go). Runs on
-- MySQL 8 and MariaDB 10.11; both enforce the CHECK. The fence column
-- only grows (see internal/lock).
CREATE TABLE stock_items (
	sku        VARCHAR(64) NOT NULL PRIMARY KEY,
	initial    INT NOT NULL,
	available  INT NOT NULL,
	version    BIGINT NOT NULL DEFAULT 0,
	fence      BIGINT NOT NULL DEFAULT 0,
	updated_at DATETIME(6) NOT NULL,
	CONSTRAINT stock_items_available_nonnegative CHECK (available >= 0)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

-- Carts: every line of an order is a row. The first line's row, the head,
-- is the order: it counts the lines (line_count). Every other line's row
-- points to it (cart_id), with a line_count of 0. See docs/orders.md#carts.
CREATE TABLE orders (
	id              BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
	sku             VARCHAR(64) NOT NULL,
	user_id         VARCHAR(64) NOT NULL,
	quantity        INT NOT NULL,
	status          VARCHAR(16) NOT NULL,
	idempotency_key VARCHAR(255) CHARACTER SET ascii COLLATE ascii_bin NULL,
	created_at      DATETIME(6) NOT NULL,
	refunded_at     DATETIME(6) NULL,
	refund_key      VARCHAR(255) CHARACTER SET ascii COLLATE ascii_bin NULL,
	expires_at      DATETIME(6) NULL,
	paid_at         DATETIME(6) NULL,
	payment_id      VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NULL,
	cancelled_at    DATETIME(6) NULL,
	cancel_key      VARCHAR(255) CHARACTER SET ascii COLLATE ascii_bin NULL,
	cart_id         BIGINT NULL,
	line_count      SMALLINT NOT NULL DEFAULT 1,
	UNIQUE KEY orders_user_key (user_id, idempotency_key),
	KEY orders_user_sku (user_id, sku, id),
	KEY orders_sku (sku),
	KEY orders_expiry (status, expires_at),
	KEY orders_cart (cart_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

-- A payment callback under its payment_id, the key of its replay: the one
-- that paid its order, or one kept as orphaned (its order expired, or
-- another payment paid it first) so that the money can go back.
CREATE TABLE payments (
	payment_id VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL PRIMARY KEY,
	order_id   BIGINT NOT NULL,
	status     VARCHAR(16) NOT NULL,
	reason     VARCHAR(32) NULL,
	created_at DATETIME(6) NOT NULL,
	KEY payments_order (order_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

-- The transactional outbox: an event per order transition, written in the
-- transaction that makes it, published by the relay job and then marked.
-- The index finds what is left to publish, in id order, and what was
-- published before the retention.
CREATE TABLE order_events (
	id           BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
	order_id     BIGINT NOT NULL,
	type         VARCHAR(16) NOT NULL,
	payload      TEXT NOT NULL,
	created_at   DATETIME(6) NOT NULL,
	published_at DATETIME(6) NULL,
	KEY order_events_unpublished (published_at, id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

-- The fence of each job that runs on one instance at a time and writes the
-- database: a run whose token is below it writes nothing.
CREATE TABLE job_fences (
	name  VARCHAR(64) NOT NULL PRIMARY KEY,
	token BIGINT NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

-- One row per user and SKU with the units of their live orders: the
-- per-user limit is checked on it inside the order transaction, under its
-- row lock.
CREATE TABLE user_purchases (
	user_id VARCHAR(64) NOT NULL,
	sku     VARCHAR(64) NOT NULL,
	units   INT NOT NULL,
	PRIMARY KEY (user_id, sku),
	KEY user_purchases_sku (sku)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

-- The sale epoch of the lua strategy: the Redis state of a SKU built from
-- its stock carries it, and one whose epoch differs, or that is missing,
-- is rebuilt before it sells. Epochs only grow.
CREATE TABLE stock_epochs (
	sku   VARCHAR(64) NOT NULL PRIMARY KEY,
	epoch BIGINT NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

-- The dbtable lock (internal/lock): a row per held lock. The token is the
-- fencing token; AUTO_INCREMENT never repeats one, even after a restart
-- (MySQL 8, MariaDB 10.2.4 and later).
CREATE TABLE locks (
	token      BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
	name       VARCHAR(191) NOT NULL,
	owner      VARCHAR(64) CHARACTER SET ascii NOT NULL,
	expires_at DATETIME(6) NOT NULL,
	UNIQUE KEY locks_name (name)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
