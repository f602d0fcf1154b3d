-- The relay's cursor: per stream, the id of the last order event it has
-- published. See the MySQL migration of the same version.
CREATE TABLE event_cursors (
	stream  TEXT NOT NULL PRIMARY KEY,
	last_id INTEGER NOT NULL
);

DROP INDEX order_events_unpublished;
