-- Claims KEYS[1] for a new request unless a record is already there.
-- ARGV[1]: the pending record; ARGV[2]: its TTL in milliseconds.
-- Returns the existing record, or false when the claim was made. A record
-- equal to ARGV[1], whose token is this request's own, is this claim made
-- already: the client resent the script after a broken connection.
local v = redis.call('GET', KEYS[1])
if v == ARGV[1] then
  return false
end
if v then
  return v
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return false
