-- The ledger of stock: a row per change of a SKU's stock that is not an
-- order's. An adjustment's Idempotency-Key is unique per SKU; a SKU's
-- initial movement has the key '', which keeps it to one.
CREATE TABLE IF NOT EXISTS stock_movements (
	id              BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
	sku             VARCHAR(64) NOT NULL,
	delta           INT NOT NULL,
	reason          VARCHAR(16) NOT NULL,
	reference       VARCHAR(128) NOT NULL DEFAULT '',
	actor           VARCHAR(16) NOT NULL,
	idempotency_key VARCHAR(255) CHARACTER SET ascii COLLATE ascii_bin NULL,
	created_at      DATETIME(6) NOT NULL,
	UNIQUE KEY stock_movements_key (sku, idempotency_key),
	KEY stock_movements_sku (sku, id),
	CONSTRAINT stock_movements_reason CHECK (reason IN ('initial', 'set', 'restock', 'correction', 'damaged', 'returned')),
	CONSTRAINT stock_movements_actor CHECK (actor IN ('admin', 'system'))
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

-- A SKU made before the ledger gets its initial movement: its initial
-- column, which every change of its stock has moved.
INSERT INTO stock_movements (sku, delta, reason, reference, actor, idempotency_key, created_at)
	SELECT s.sku, s.initial, 'initial', '', 'system', '', UTC_TIMESTAMP(6) FROM stock_items s
	WHERE NOT EXISTS (SELECT 1 FROM stock_movements m WHERE m.sku = s.sku)
	ON DUPLICATE KEY UPDATE id = id;
