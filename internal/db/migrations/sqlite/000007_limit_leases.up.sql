-- A limit lease (see the MySQL migration). SQLite serves one process,
-- which takes none; the column keeps the schemas alike.
ALTER TABLE user_purchases ADD COLUMN limit_until DATETIME NULL;
