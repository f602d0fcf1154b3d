DROP TABLE IF EXISTS stock_movements;
