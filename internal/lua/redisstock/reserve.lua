-- reserve.lua: KEYS = {state, holdings, log, keys, answer}, ARGV = {epoch,
-- user, key, quantity, per-user limit (0: none), consumer, looked up (1 or
-- 0), take-over idle in milliseconds, consumer group, answer TTL in
-- milliseconds, the record kept for sold out ("" for none: one bucket's
-- sold out is not the SKU's), the record kept for over the limit, less
-- what the user holds, the user's key as keys names it (idempotency.Field)}.
-- A TTL of 0 keeps no answer.
-- One buyer's reservation, and its Idempotency-Key's claim, in one step.
-- A key's final answer is kept in a record, as every key's is
-- (idempotency.Record), made by the caller: "<fingerprint>|<answer>",
-- whose fingerprint is the request's quantity. A retry of the same
-- request gets the answer again, one for another quantity is refused.
-- keys holds an order's, for the sale's life, as the unique index keeps
-- the order's key; answer a refusal's, for the TTL.
-- Otherwise: check the state's epoch, the stock and the user's limit, take
-- the units, and append the reservation to the log, pending at once for
-- this consumer (XCLAIM FORCE) until persisted, and claimable by another
-- consumer if this one dies. A refusal is kept as the key's answer.
-- keys maps each user and key to its reservation's entry while it is in
-- the log, then to its answer once the database has its order. "done",
-- which the release before this one kept there instead of the answer, is
-- read as the order's key sent to the database; nothing writes it now. A buyer's retry
-- whose reservation is still in the log never takes units of another
-- buyer: while the reservation has been pending for less than the take-over
-- idle, its process may still be persisting it, and the retry is told so;
-- after that (its batch failed, or its process died) the retry takes it
-- over, as the reconciler's claim would.
-- One whose key is done, or any key while the state's "lookup" is set (the
-- state was built when the database had orders that keys does not know),
-- is sent to the database first: "looked up" says that the caller has
-- looked and the key has no order there.
-- Returns {"ok", id}, {"answer", answer}, {"stale", epoch or ""},
-- {"sold-out", available}, {"in-doubt"} when the units in the log would
-- fill it (doubt.lua), {"limit", held}, {"reused", id or ""}, when the
-- key's reservation or answer is for another quantity, {"in-progress",
-- id}, or {"lookup"}.
local group = ARGV[9]
local field = ARGV[13]
local prior = redis.call("HGET", KEYS[4], field)
local answer = prior
if not prior then
	answer = redis.call("GET", KEYS[5])
end
if answer and string.find(answer, "|", 1, true) then
	local fingerprint, kept = string.match(answer, "^([^|]*)|(.*)$")
	if fingerprint ~= ARGV[4] then
		return {"reused", ""}
	end
	return {"answer", kept}
end
local state = redis.call("HMGET", KEYS[1], "epoch", "available", "lookup")
local epoch = state[1]
if epoch ~= ARGV[1] then
	return {"stale", epoch or ""}
end
local lookedUp = ARGV[7] == "1"
if prior == "done" or (not prior and state[3] == "1") then
	if not lookedUp then
		return {"lookup"}
	end
	prior = false
end
if prior then
	local e = redis.call("XRANGE", KEYS[3], prior, prior)[1]
	if e then
		for j = 1, #e[2], 2 do
			if e[2][j] == "qty" and e[2][j + 1] ~= ARGV[4] then
				return {"reused", prior}
			end
		end
		if #redis.call("XCLAIM", KEYS[3], group, ARGV[6], ARGV[8], prior, "JUSTID") == 0 then
			return {"in-progress", prior}
		end
		return {"ok", prior}
	end
	redis.call("HDEL", KEYS[4], field)
end
local qty = tonumber(ARGV[4])
local available = tonumber(state[2])
local keep = ARGV[10] ~= "0"
if available < qty then
	if in_doubt(KEYS[3], available, qty) then
		return {"in-doubt"} -- not sold out yet, and not kept
	end
	if keep and ARGV[11] ~= "" then
		redis.call("SET", KEYS[5], ARGV[11], "PX", ARGV[10])
	end
	return {"sold-out", tostring(available)}
end
local limit = tonumber(ARGV[5])
if limit > 0 then
	local held = tonumber(redis.call("HGET", KEYS[2], ARGV[2]) or "0")
	if held + qty > limit then
		if keep then
			redis.call("SET", KEYS[5], ARGV[12] .. held, "PX", ARGV[10])
		end
		return {"limit", tostring(held)}
	end
end
local id = redis.call("XADD", KEYS[3], "*", "user", ARGV[2], "key", ARGV[3], "qty", ARGV[4])
local read = redis.pcall("XCLAIM", KEYS[3], group, ARGV[6], 0, id, "FORCE", "JUSTID")
if type(read) ~= "table" or read.err then
	redis.call("XDEL", KEYS[3], id)
	return {"stale", epoch}
end
redis.call("HINCRBY", KEYS[1], "available", -qty)
redis.call("HSET", KEYS[4], field, id)
if limit > 0 then
	redis.call("HINCRBY", KEYS[2], ARGV[2], qty)
end
return {"ok", id}
