-- The relay of the previous release marks each event: the events up to
-- every stream's cursor are published, so they are marked now; those past
-- it are left for that relay.
ALTER TABLE order_events ADD KEY order_events_unpublished (published_at, id);
UPDATE order_events SET published_at = UTC_TIMESTAMP(6)
	WHERE published_at IS NULL AND id <= (SELECT COALESCE(MIN(last_id), 0) FROM event_cursors);
DROP TABLE event_cursors;
