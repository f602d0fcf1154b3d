-- release.lua (Redlock, CompareAndDelete): KEYS = {lock}, ARGV = {owner}.
-- Deletes the lock only if the owner still holds it (compare-and-delete).
-- Returns 1, or 0 if another holder has it or it expired.
if redis.call("get", KEYS[1]) == ARGV[1] then
	return redis.call("del", KEYS[1])
end
return 0
