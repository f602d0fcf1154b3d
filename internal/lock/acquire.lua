-- acquire.lua: KEYS = {lock, fence counter}, ARGV = {owner, ttl in ms}.
-- Takes the lock for the owner if it is free and, in the same atomic step,
-- counts the acquisition: the count is the fencing token. A token counted in
-- a second round trip would not fence: a holder paused between the two calls
-- would get a newer token than its successor. Returns the token, or nil if
-- the lock is held.
if redis.call("set", KEYS[1], ARGV[1], "NX", "PX", ARGV[2]) then
	return redis.call("incr", KEYS[2])
end
return false
