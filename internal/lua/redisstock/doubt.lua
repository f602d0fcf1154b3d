-- doubt.lua: the prelude of reserve.lua, cart.lua and lacks.lua.
-- A SKU's log holds the reservations that Redis has granted and the
-- database does not have yet, and carts' lines until their sagas end. Any
-- of them may still give its units back: the database refuses it, its
-- batch is refused for a state built anew (a Redis restarted empty), or
-- its saga gives its line back. A buyer short of units is therefore told
-- sold out only when even every logged unit given back would not be
-- enough; otherwise the shortage is in doubt, and the buyer asks again
-- shortly. A sold out told while the last units were only logged, and
-- then came back, would be a lie. Every entry holds a unit at least, so
-- a log of as many entries as are missing fills the shortage unread.
local function in_doubt(log, available, qty)
	local need = qty - available
	local n = redis.call("XLEN", log)
	if n >= need then
		return true
	end
	local logged = 0
	for _, e in ipairs(redis.call("XRANGE", log, "-", "+")) do
		for j = 1, #e[2], 2 do
			if e[2][j] == "qty" then
				logged = logged + tonumber(e[2][j + 1])
			end
		end
	end
	return logged >= need
end
