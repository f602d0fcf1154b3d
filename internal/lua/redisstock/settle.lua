-- settle.lua: KEYS = {state, holdings, log, keys}, ARGV = {consumer
-- group, limited (1 or 0), then for each reservation: id, quantity, user,
-- the user's key as keys names it (idempotency.Field), how (0 kept, 1
-- released, 2 released as a replay), the record (idempotency.Record) of
-- the answer its order is}.
-- Ends reservations once their batch has committed: each is acknowledged
-- and deleted from the log. In keys, a key whose order the database has
-- (kept, or a replay of its order) gets that record, as reserve.lua reads
-- it; a refused one, or one with no record, is removed. A released one gives its units back, but only if it was still
-- in the log: the log's entries are exactly the units that Redis has taken
-- and the database has not, so one that is gone (Redis lost it, or it was
-- settled already) was never counted here, or has been given back. The
-- kept ones, most of them, are acknowledged and deleted together. Returns
-- the units given back.
local given = 0
local kept = {}
for i = 3, #ARGV, 6 do
	local field = ARGV[i + 3]
	local how, answer = ARGV[i + 4], ARGV[i + 5]
	if how ~= "1" and answer ~= "" then
		redis.call("HSET", KEYS[4], field, answer)
	elseif redis.call("HGET", KEYS[4], field) == ARGV[i] then
		redis.call("HDEL", KEYS[4], field)
	end
	if how == "0" then
		kept[#kept + 1] = ARGV[i]
	else
		redis.call("XACK", KEYS[3], ARGV[1], ARGV[i])
		local gone = redis.call("XDEL", KEYS[3], ARGV[i])
		if gone == 1 and redis.call("EXISTS", KEYS[1]) == 1 then
			local qty = tonumber(ARGV[i + 1])
			redis.call("HINCRBY", KEYS[1], "available", qty)
			if ARGV[2] == "1" then
				redis.call("HINCRBY", KEYS[2], ARGV[i + 2], -qty)
			end
			given = given + qty
		end
	end
end
if #kept > 0 then
	redis.call("XACK", KEYS[3], ARGV[1], unpack(kept))
	redis.call("XDEL", KEYS[3], unpack(kept))
end
return given
