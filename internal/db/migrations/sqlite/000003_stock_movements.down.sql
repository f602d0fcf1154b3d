DROP INDEX IF EXISTS stock_movements_sku;
DROP TABLE IF EXISTS stock_movements;
