-- settle.lua: KEYS = {state, holdings, log, keys, then each reservation's
-- answer key}, ARGV = {consumer group, limited (1 or 0), answer TTL in
-- milliseconds, then for each reservation: id, quantity, user, key, how (0
-- kept, 1 released, 2 released as a replay), its final answer ("" for
-- none)}.
-- Ends reservations once their batch has committed: each is acknowledged
-- and deleted from the log, and its final answer kept under its key with
-- the request's quantity, as reserve.lua reads it. In keys, a key whose
-- order the database has (kept, or a replay of its order) is marked done; a
-- refused one is removed. A released one gives its units back, but only if
-- it was still in the log: the log's entries are exactly the units that
-- Redis has taken and the database has not, so one that is gone (Redis
-- lost it, or it was settled already) was never counted here, or has been
-- given back. Returns the units given back.
local given = 0
for i = 4, #ARGV, 6 do
	redis.call("XACK", KEYS[3], ARGV[1], ARGV[i])
	local gone = redis.call("XDEL", KEYS[3], ARGV[i])
	local field = ARGV[i + 2] .. "\n" .. ARGV[i + 3]
	local how = ARGV[i + 4]
	if how ~= "1" then
		redis.call("HSET", KEYS[4], field, "done")
	elseif redis.call("HGET", KEYS[4], field) == ARGV[i] then
		redis.call("HDEL", KEYS[4], field)
	end
	if ARGV[i + 5] ~= "" then
		redis.call("SET", KEYS[4 + (i - 4) / 6 + 1], ARGV[i + 1] .. "|" .. ARGV[i + 5], "PX", ARGV[3])
	end
	if how ~= "0" and gone == 1 and redis.call("EXISTS", KEYS[1]) == 1 then
		local qty = tonumber(ARGV[i + 1])
		redis.call("HINCRBY", KEYS[1], "available", qty)
		if ARGV[2] == "1" then
			redis.call("HINCRBY", KEYS[2], ARGV[i + 2], -qty)
		end
		given = given + qty
	end
end
return given
