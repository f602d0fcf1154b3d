-- lacks.lua: KEYS = {state, log}, ARGV = {quantity}.
-- Whether the state has fewer than quantity units left, and whether that
-- is in doubt (doubt.lua). Returns {short, in doubt}, each 1 or 0; a SKU
-- with no state lacks nothing.
local a = redis.call("HGET", KEYS[1], "available")
local qty = tonumber(ARGV[1])
if not a or tonumber(a) >= qty then
	return {0, 0}
end
return {1, in_doubt(KEYS[2], tonumber(a), qty) and 1 or 0}
