ALTER TABLE user_purchases DROP COLUMN limit_until;
