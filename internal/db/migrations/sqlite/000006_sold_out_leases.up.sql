-- A sold-out lease (see the MySQL migration). SQLite serves one process,
-- which takes none; the column keeps the schemas alike.
ALTER TABLE stock_items ADD COLUMN sold_out_until DATETIME NULL;
