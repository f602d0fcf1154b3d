-- mysql/000001_baseline.up.sql in SQLite's words: the same tables,
-- columns, keys and CHECK.
CREATE TABLE stock_items (
	sku        TEXT NOT NULL PRIMARY KEY,
	initial    INTEGER NOT NULL,
	available  INTEGER NOT NULL,
	version    INTEGER NOT NULL DEFAULT 0,
	fence      INTEGER NOT NULL DEFAULT 0,
	updated_at DATETIME NOT NULL,
	CONSTRAINT stock_items_available_nonnegative CHECK (available >= 0)
);

CREATE TABLE orders (
	id              INTEGER PRIMARY KEY AUTOINCREMENT,
	sku             TEXT NOT NULL,
	user_id         TEXT NOT NULL,
	quantity        INTEGER NOT NULL,
	status          TEXT NOT NULL,
	idempotency_key TEXT NULL,
	created_at      DATETIME NOT NULL,
	refunded_at     DATETIME NULL,
	refund_key      TEXT NULL,
	expires_at      DATETIME NULL,
	paid_at         DATETIME NULL,
	payment_id      TEXT NULL,
	cancelled_at    DATETIME NULL,
	cancel_key      TEXT NULL,
	cart_id         INTEGER NULL,
	line_count      INTEGER NOT NULL DEFAULT 1,
	CONSTRAINT orders_user_key UNIQUE (user_id, idempotency_key)
);
CREATE INDEX orders_user_sku ON orders (user_id, sku, id);
CREATE INDEX orders_sku ON orders (sku);
CREATE INDEX orders_expiry ON orders (status, expires_at);
CREATE INDEX orders_cart ON orders (cart_id);

CREATE TABLE user_purchases (
	user_id TEXT NOT NULL,
	sku     TEXT NOT NULL,
	units   INTEGER NOT NULL,
	PRIMARY KEY (user_id, sku)
);
CREATE INDEX user_purchases_sku ON user_purchases (sku);

CREATE TABLE stock_epochs (
	sku   TEXT NOT NULL PRIMARY KEY,
	epoch INTEGER NOT NULL
);

CREATE TABLE locks (
	token      INTEGER PRIMARY KEY AUTOINCREMENT,
	name       TEXT NOT NULL,
	owner      TEXT NOT NULL,
	expires_at DATETIME NOT NULL,
	CONSTRAINT locks_name UNIQUE (name)
);

CREATE TABLE payments (
	payment_id TEXT NOT NULL PRIMARY KEY,
	order_id   INTEGER NOT NULL,
	status     TEXT NOT NULL,
	reason     TEXT NULL,
	created_at DATETIME NOT NULL
);
CREATE INDEX payments_order ON payments (order_id);

CREATE TABLE order_events (
	id           INTEGER PRIMARY KEY AUTOINCREMENT,
	order_id     INTEGER NOT NULL,
	type         TEXT NOT NULL,
	payload      TEXT NOT NULL,
	created_at   DATETIME NOT NULL,
	published_at DATETIME NULL
);
CREATE INDEX order_events_unpublished ON order_events (published_at, id);

CREATE TABLE job_fences (
	name  TEXT NOT NULL PRIMARY KEY,
	token INTEGER NOT NULL
);
