-- adjust.lua: KEYS = {state, holdings}, ARGV = {epoch, delta, user or "",
-- limited (1 or 0)}.
-- Applies to Redis a change the database has committed (a refund, or a
-- change of the stock that keeps the orders), if the state is still the one
-- of the epoch read in that transaction: a state built later was built from
-- the database with the change in it. Returns 1 if applied, 0 if not.
if redis.call("HGET", KEYS[1], "epoch") ~= ARGV[1] then
	return 0
end
redis.call("HINCRBY", KEYS[1], "available", ARGV[2])
if ARGV[4] == "1" and ARGV[3] ~= "" then
	redis.call("HINCRBY", KEYS[2], ARGV[3], -tonumber(ARGV[2]))
end
return 1
