DROP TABLE locks;
DROP TABLE stock_epochs;
DROP TABLE user_purchases;
DROP TABLE job_fences;
DROP TABLE order_events;
DROP TABLE payments;
DROP TABLE orders;
DROP TABLE stock_items;
