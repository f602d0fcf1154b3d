-- reserve.lua: KEYS = {state, holdings, log, keys, answer}, ARGV = {epoch,
-- user, key, quantity, per-user limit (0: none), consumer, looked up (1 or
-- 0), take-over idle in milliseconds, consumer group, answer TTL in
-- milliseconds, the answer kept for sold out, the answer kept for over the
-- limit, less what the user holds}. A TTL of 0 keeps no answer.
-- One buyer's reservation, and its Idempotency-Key's claim, in one step.
-- answer is the key's final answer, kept with the request's quantity for
-- the TTL: a retry of the same request gets it again, one for another
-- quantity is refused. Otherwise: check the state's epoch, the stock and
-- the user's limit, take the units, and append the reservation to the
-- log, delivered at once to this consumer so that it is pending there
-- until persisted (and claimable by another consumer if this one dies).
-- A refusal is kept as the key's answer.
-- keys maps each user and key to its reservation's entry while it is in
-- the log, then to "done" once the database has its order. A buyer's retry
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
-- {"sold-out", available}, {"limit", held}, {"reused", id or ""}, when the
-- key's reservation or answer is for another quantity, {"in-progress",
-- id}, or {"lookup"}.
local group = ARGV[9]
local answer = redis.call("GET", KEYS[5])
if answer then
	local qty, kept = string.match(answer, "^(%d+)|(.*)$")
	if qty ~= ARGV[4] then
		return {"reused", ""}
	end
	return {"answer", kept}
end
local epoch = redis.call("HGET", KEYS[1], "epoch")
if epoch ~= ARGV[1] then
	return {"stale", epoch or ""}
end
local field = ARGV[2] .. "\n" .. ARGV[3]
local prior = redis.call("HGET", KEYS[4], field)
local lookedUp = ARGV[7] == "1"
if prior == "done" or (not prior and redis.call("HGET", KEYS[1], "lookup") == "1") then
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
local available = tonumber(redis.call("HGET", KEYS[1], "available"))
local keep = ARGV[10] ~= "0"
if available < qty then
	if keep then
		redis.call("SET", KEYS[5], ARGV[4] .. "|" .. ARGV[11], "PX", ARGV[10])
	end
	return {"sold-out", tostring(available)}
end
local limit = tonumber(ARGV[5])
if limit > 0 then
	local held = tonumber(redis.call("HGET", KEYS[2], ARGV[2]) or "0")
	if held + qty > limit then
		if keep then
			redis.call("SET", KEYS[5], ARGV[4] .. "|" .. ARGV[12] .. held, "PX", ARGV[10])
		end
		return {"limit", tostring(held)}
	end
end
local id = redis.call("XADD", KEYS[3], "*", "user", ARGV[2], "key", ARGV[3], "qty", ARGV[4])
-- Every earlier entry was delivered the same way, so the one entry this
-- reads is the one just added.
local read = redis.pcall("XREADGROUP", "GROUP", group, ARGV[6], "COUNT", "1", "STREAMS", KEYS[3], ">")
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
