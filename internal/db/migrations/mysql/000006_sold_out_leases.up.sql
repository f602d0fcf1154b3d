-- A sold-out lease: until when, by the database's clock, an instance may
-- answer that the SKU has no unit without asking. Units given back wait
-- for it to end (see docs/strategies.md#sold-out-leases).
ALTER TABLE stock_items ADD COLUMN sold_out_until DATETIME(6) NULL;
