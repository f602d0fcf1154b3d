-- load.lua: KEYS = {state, holdings, log, fence, keys}, ARGV = {consumer group,
-- fencing token (0: none), epoch, available in the database, limited (1 or
-- 0), lookup (1 or 0 for a state built anew, "" to keep it, "dealt" to
-- keep it for a bucket whose share may change), n, then n triples of a
-- log entry whose order the database has: its id, its user's key as keys
-- names it (idempotency.Field), and the record of the answer its order is
-- (idempotency.Record); then user, units pairs of what the database says
-- users hold}.
-- Sets a SKU's Redis state from the database, run while the database's
-- stock row is locked: available is the database's, less every reservation
-- still in the log that the database does not have, counted here, in the
-- same step as the write, so that a reservation made meanwhile is counted
-- too. A log entry whose order the database has leaves the log, and its
-- key gets its order's record, as its settlement would have it (a replica
-- promoted to master may lack the settlement). A cart's line whose order
-- the database has stays in the log until its saga ends it (give.lua): it
-- is not pending, though its units are in doubt until then (doubt.lua), as
-- every entry's in the log are. A kept state
-- whose available was wrong had lost writes, so its
-- keys may have too: it gets lookup set, which sends every key to the
-- database before it reserves (see reserve.lua). A token below the fence,
-- a later run's, changes nothing. Returns
-- {"ok", available before or "", available after, pending entries} or
-- {"fenced", fence}.
local token = tonumber(ARGV[2])
if token > 0 then
	local fence = tonumber(redis.call("GET", KEYS[4]) or "0")
	if token < fence then
		return {"fenced", tostring(fence)}
	end
	redis.call("SET", KEYS[4], ARGV[2])
end
local limited = ARGV[5] == "1"
local n = tonumber(ARGV[7])
local persisted = {}
for i = 8, 7 + 3 * n, 3 do
	persisted[ARGV[i]] = {ARGV[i + 1], ARGV[i + 2]}
end
local held = {}
for i = 8 + 3 * n, #ARGV, 2 do
	held[ARGV[i]] = tonumber(ARGV[i + 1])
end
redis.pcall("XGROUP", "CREATE", KEYS[3], ARGV[1], "$", "MKSTREAM") -- BUSYGROUP: it exists
local pending, count = 0, 0
for _, e in ipairs(redis.call("XRANGE", KEYS[3], "-", "+")) do
	local f = {}
	for j = 1, #e[2], 2 do
		f[e[2][j]] = e[2][j + 1]
	end
	if persisted[e[1]] and not f.cart then
		-- Its settlement was lost (a promoted replica lacks it) or is on
		-- its way: the database has its order, so it leaves the log, and
		-- its key gets the order's record.
		local field, record = persisted[e[1]][1], persisted[e[1]][2]
		if redis.call("HGET", KEYS[5], field) == e[1] then
			redis.call("HSET", KEYS[5], field, record)
		end
		redis.call("XACK", KEYS[3], ARGV[1], e[1])
		redis.call("XDEL", KEYS[3], e[1])
	elseif not persisted[e[1]] then
		local qty = tonumber(f.qty)
		pending, count = pending + qty, count + 1
		held[f.user] = (held[f.user] or 0) + qty
	end
end
local before = redis.call("HGET", KEYS[1], "available") or ""
local available = tonumber(ARGV[4]) - pending
local lookup = ARGV[6]
if lookup == "" and before ~= "" and tonumber(before) ~= available then
	lookup = "1"
end
if lookup == "dealt" then
	lookup = "" -- a bucket's share changed by design: no sign of lost writes
end
redis.call("HSET", KEYS[1], "available", available, "epoch", ARGV[3])
if lookup ~= "" then
	redis.call("HSET", KEYS[1], "lookup", lookup)
end
redis.call("DEL", KEYS[2])
if limited then
	for user, units in pairs(held) do
		if units > 0 then
			redis.call("HSET", KEYS[2], user, units)
		end
	end
end
return {"ok", before, tostring(available), tostring(count)}
