-- The relay of the previous release marks each event: the events up to
-- every stream's cursor are published, so they are marked now.
CREATE INDEX order_events_unpublished ON order_events (published_at, id);
UPDATE order_events SET published_at = strftime('%Y-%m-%d %H:%M:%f', 'now')
	WHERE published_at IS NULL AND id <= (SELECT COALESCE(MIN(last_id), 0) FROM event_cursors);
DROP TABLE event_cursors;
