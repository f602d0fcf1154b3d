-- A limit lease: until when, by the database's clock, an instance may
-- answer that the buyer holds the per-user limit of the SKU without
-- asking. What lowers the buyer's units waits for it to end (see
-- docs/strategies.md#sold-out-leases).
ALTER TABLE user_purchases ADD COLUMN limit_until DATETIME(6) NULL;
