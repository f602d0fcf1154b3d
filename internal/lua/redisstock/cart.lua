-- cart.lua: KEYS = for each line, {state, holdings, log, keys}; ARGV =
-- {consumer group, consumer, user, key, per-user limit (0: none), saga
-- (the reservation's barrier id), then for each line: epoch, quantity}.
-- Reserves a cart's lines, all or none, in one step: every key is in one
-- hash slot (one Redis, or one sale tag), or the cart is a saga and this
-- is one of its lines. Each line's reservation is logged in its SKU's log,
-- pending for this process until the database has the cart, as
-- reserve.lua logs one buyer's; its entry names the saga.
-- The barrier: keys holds, under "cart\n<saga>", the line's entry, "done"
-- once the database has the cart, or "given-back" once give.lua has run.
-- A line that is given back first is never reserved after ("hanging"); one
-- reserved already is not reserved again (a duplicate).
-- A short line that the units in its log would fill is in doubt
-- (doubt.lua).
-- Returns {"ok", id per line}, {"stale", line}, {"given-back", line},
-- {"sold-out", in doubt (1 or 0), line, line…} naming every short line,
-- or {"limit", line, held}.
local group, consumer, user, key = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local limit = tonumber(ARGV[5])
local field = "cart\n" .. ARGV[6]
local n = #KEYS / 4
local short = {}
local doubt = "0"
local prior = {}
for i = 1, n do
	local k = (i - 1) * 4
	local b = redis.call("HGET", KEYS[k + 4], field)
	if b == "given-back" or b == "done" then
		return {"given-back", tostring(i)}
	end
	prior[i] = b
	if not b then
		local state = redis.call("HMGET", KEYS[k + 1], "epoch", "available")
		if state[1] ~= ARGV[5 + 2 * i] then
			return {"stale", tostring(i)}
		end
		local qty = tonumber(ARGV[6 + 2 * i])
		if tonumber(state[2]) < qty then
			short[#short + 1] = tostring(i)
			if in_doubt(KEYS[k + 3], tonumber(state[2]), qty) then
				doubt = "1"
			end
		elseif limit > 0 then
			local held = tonumber(redis.call("HGET", KEYS[k + 2], user) or "0")
			if held + qty > limit then
				return {"limit", tostring(i), tostring(held)}
			end
		end
	end
end
if #short > 0 then
	return {"sold-out", doubt, unpack(short)}
end
local ids = {}
for i = 1, n do
	local k = (i - 1) * 4
	if prior[i] then
		ids[i] = prior[i]
	else
		local id = redis.call("XADD", KEYS[k + 3], "*", "user", user, "key", key, "qty", ARGV[6 + 2 * i], "cart", ARGV[6])
		local read = redis.pcall("XCLAIM", KEYS[k + 3], group, consumer, 0, id, "FORCE", "JUSTID")
		if type(read) ~= "table" or read.err then
			-- No consumer group: the state was not built by load.lua. Undo
			-- this step's lines, and have the caller build it.
			redis.call("XDEL", KEYS[k + 3], id)
			for j = 1, i - 1 do
				if not prior[j] then
					local kj = (j - 1) * 4
					redis.call("XACK", KEYS[kj + 3], group, ids[j])
					redis.call("XDEL", KEYS[kj + 3], ids[j])
				end
			end
			return {"stale", tostring(i)}
		end
		ids[i] = id
	end
end
for i = 1, n do
	if not prior[i] then
		local k = (i - 1) * 4
		local qty = tonumber(ARGV[6 + 2 * i])
		redis.call("HINCRBY", KEYS[k + 1], "available", -qty)
		redis.call("HSET", KEYS[k + 4], field, ids[i])
		if limit > 0 then
			redis.call("HINCRBY", KEYS[k + 2], user, qty)
		end
	end
end
return {"ok", unpack(ids)}
