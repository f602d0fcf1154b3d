-- Replaces this request's own pending record: with the final response
-- (ARGV[2], kept ARGV[3] milliseconds), or, when ARGV[2] is empty, by
-- nothing, so that the key can be tried again. A record that is no longer
-- this request's (its marker expired and another request took the key) is
-- left alone. ARGV[1]: the pending record this request wrote.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
if ARGV[2] == '' then
  redis.call('DEL', KEYS[1])
else
  redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
end
return 1
