-- The relay's cursor: per stream, the id of the last order event it has
-- published. Every event up to it is published; the relay reads on from
-- it and moves it with one single-row UPDATE a batch, in place of marking
-- each event (see docs/orders.md#order-events). An events stream's first
-- run of the relay sets its row: where the shop's relay got, for a stream
-- renamed; else before the first event published_at leaves unpublished,
-- which carries a database of the previous release over. published_at
-- stays, for those events; nothing reads it by index any more.
CREATE TABLE event_cursors (
	stream  VARCHAR(191) NOT NULL PRIMARY KEY,
	last_id BIGINT NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

ALTER TABLE order_events DROP INDEX order_events_unpublished;
