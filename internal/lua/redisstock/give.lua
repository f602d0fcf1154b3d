-- give.lua: KEYS = {state, holdings, log, keys}, ARGV = {consumer group,
-- saga, limited (1 or 0), done (1 or 0)}.
-- Ends one line of a cart that cart.lua reserved, exactly once, behind the
-- barrier in keys under "cart\n<saga>". With done, the database has the
-- cart: the entry leaves the log, its units stay taken, and the barrier
-- becomes "done". Otherwise it is a saga's compensation:
--   the line's entry: its units go back, if the entry is still in the log
--     (one that is gone was never counted here: Redis lost it, or a
--     rebuild found its order in the database), and the barrier becomes
--     "given-back";
--   nothing yet: the give-back came before its reservation ("null
--     compensation"); the barrier becomes "given-back", so that the late
--     reservation is refused rather than left held ("hanging");
--   "given-back": a duplicate, ignored;
--   "done": the database has the cart; nothing goes back.
-- Returns the units given back (or, with done, ended), -1 for a duplicate,
-- -2 for a line already done.
local field = "cart\n" .. ARGV[2]
local done = ARGV[4] == "1"
local b = redis.call("HGET", KEYS[4], field)
if b == "given-back" then
	return -1
end
if b == "done" then
	return -2
end
redis.call("HSET", KEYS[4], field, done and "done" or "given-back")
if not b then
	return 0
end
local e = redis.call("XRANGE", KEYS[3], b, b)[1]
if not e then
	return 0
end
local f = {}
for j = 1, #e[2], 2 do
	f[e[2][j]] = e[2][j + 1]
end
local qty = tonumber(f.qty)
redis.call("XACK", KEYS[3], ARGV[1], b)
redis.call("XDEL", KEYS[3], b)
if not done and redis.call("EXISTS", KEYS[1]) == 1 then
	redis.call("HINCRBY", KEYS[1], "available", qty)
	if ARGV[3] == "1" then
		redis.call("HINCRBY", KEYS[2], f.user, -qty)
	end
end
return qty
