-- The traceparent of the request that made an order event, passed on by the relay.
ALTER TABLE order_events ADD COLUMN traceparent VARCHAR(55) CHARACTER SET ascii COLLATE ascii_bin NULL;
