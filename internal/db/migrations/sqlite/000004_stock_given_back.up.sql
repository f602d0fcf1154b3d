-- How many give-backs (an expiry, a cancel, a refund) have returned units
-- to a SKU. A give-back adds to available without the SKU's lock; a lock
-- holder writes only if none came between its read and its write.
ALTER TABLE stock_items ADD COLUMN given_back INTEGER NOT NULL DEFAULT 0;
