-- confirm.lua: KEYS = {lock, fence counter}, ARGV = {owner, token}.
-- Raises this master's fence counter to the token, if the owner still holds
-- the lock here: the token a Redlock chose over its quorum, or the one
-- Lease.Raise chose past a fence. Returns 1, or 0 if the owner does not hold
-- the lock.
if redis.call("get", KEYS[1]) ~= ARGV[1] then
	return 0
end
if tonumber(redis.call("get", KEYS[2]) or "0") < tonumber(ARGV[2]) then
	redis.call("set", KEYS[2], ARGV[2])
end
return 1
