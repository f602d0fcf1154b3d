ALTER TABLE stock_items DROP COLUMN sold_out_until;
