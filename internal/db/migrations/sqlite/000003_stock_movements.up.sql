-- The ledger of stock: a row per change of a SKU's stock that is not an
-- order's. An adjustment's Idempotency-Key is unique per SKU; a SKU's
-- initial movement has the key '', which keeps it to one.
CREATE TABLE IF NOT EXISTS stock_movements (
	id              INTEGER PRIMARY KEY AUTOINCREMENT,
	sku             TEXT NOT NULL,
	delta           INTEGER NOT NULL,
	reason          TEXT NOT NULL,
	reference       TEXT NOT NULL DEFAULT '',
	actor           TEXT NOT NULL,
	idempotency_key TEXT NULL,
	created_at      DATETIME NOT NULL,
	CONSTRAINT stock_movements_key UNIQUE (sku, idempotency_key),
	CONSTRAINT stock_movements_reason CHECK (reason IN ('initial', 'set', 'restock', 'correction', 'damaged', 'returned')),
	CONSTRAINT stock_movements_actor CHECK (actor IN ('admin', 'system'))
);
CREATE INDEX IF NOT EXISTS stock_movements_sku ON stock_movements (sku, id);

-- A SKU made before the ledger gets its initial movement: its initial
-- column, which every change of its stock has moved.
INSERT OR IGNORE INTO stock_movements (sku, delta, reason, reference, actor, idempotency_key, created_at)
	SELECT s.sku, s.initial, 'initial', '', 'system', '', strftime('%Y-%m-%d %H:%M:%f', 'now') FROM stock_items s
	WHERE NOT EXISTS (SELECT 1 FROM stock_movements m WHERE m.sku = s.sku);
