-- extend.lua (Redlock): KEYS = {lock}, ARGV = {owner, ttl in ms}.
-- Renews the lock for ARGV[2] ms if the owner still holds it. Returns 1 or 0.
if redis.call("get", KEYS[1]) == ARGV[1] then
	return redis.call("pexpire", KEYS[1], ARGV[2])
end
return 0
