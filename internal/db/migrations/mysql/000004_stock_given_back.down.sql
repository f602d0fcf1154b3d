ALTER TABLE stock_items DROP COLUMN given_back;
