-- One flush of one replica, atomically: its totals in, the fleet's verdicts
-- out. Time is the server's (TIME), so replicas' clocks never disagree.
-- Key and argument layout: fleet/script.rs. Every key written gets a TTL.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local prefix, replica = ARGV[1], ARGV[2]
local breakers, budgets = tonumber(ARGV[3]), tonumber(ARGV[4])
local state_ttl = tonumber(ARGV[5])
local out = {now}
local i = 6

-- What a replica's cumulative total adds since the last flush the server
-- applied (its record; the replica's own acknowledged total when the
-- record is gone). Resending a total adds nothing: a flush that timed out
-- on the replica's side but ran here is not counted twice. The record only
-- grows: a stale flush that runs late (queued on a connection the replica
-- has since remade) must not wind it back, or the next flush would count
-- again what was counted since.
local function delta(record, field, total, acked)
  local last = redis.call('HGET', record, field)
  last = last and tonumber(last) or acked
  if total > last then
    redis.call('HSET', record, field, total)
    return total - last
  end
  return 0
end

-- Two fields summed over the buckets that make up the window ending now.
local function window_sum(base, width, window, a_field, b_field)
  local current = math.floor(now / width)
  local a, b = 0, 0
  for id = current - math.ceil(window / width) + 1, current do
    local v = redis.call('HMGET', base .. id, a_field, b_field)
    a = a + (tonumber(v[1]) or 0)
    b = b + (tonumber(v[2]) or 0)
  end
  return a, b
end

local function add(bucket, field, n, ttl)
  if n > 0 then
    redis.call('HINCRBY', bucket, field, n)
    redis.call('PEXPIRE', bucket, ttl)
  end
end

for _ = 1, breakers do
  local name = ARGV[i]
  local window, width = tonumber(ARGV[i + 1]), tonumber(ARGV[i + 2])
  local threshold, rate, min_calls = tonumber(ARGV[i + 3]), tonumber(ARGV[i + 4]), tonumber(ARGV[i + 5])
  local open_for, max_probes, to_close = tonumber(ARGV[i + 6]), tonumber(ARGV[i + 7]), tonumber(ARGV[i + 8])
  local seen, want, view = tonumber(ARGV[i + 9]), tonumber(ARGV[i + 10]), tonumber(ARGV[i + 11])
  local key = prefix .. ':breaker:' .. name
  local record = prefix .. ':replica:' .. replica .. ':breaker:' .. name
  local calls = delta(record, 'c', tonumber(ARGV[i + 12]), tonumber(ARGV[i + 16]))
  local failures = delta(record, 'f', tonumber(ARGV[i + 13]), tonumber(ARGV[i + 17]))
  local probe_ok = delta(record, 'pok', tonumber(ARGV[i + 14]), tonumber(ARGV[i + 18]))
  local probe_failed = delta(record, 'pf', tonumber(ARGV[i + 15]), tonumber(ARGV[i + 19]))
  redis.call('PEXPIRE', record, 2 * window + state_ttl)
  i = i + 20

  local st = redis.call('HMGET', key, 'epoch', 'until', 'slots', 'slots_at', 'ok')
  local epoch, open_until, slots, slots_at, ok = 0, 0, 0, 0, 0
  if st[1] then
    epoch, open_until = tonumber(st[1]), tonumber(st[2])
    slots, slots_at, ok = tonumber(st[3]), tonumber(st[4]), tonumber(st[5])
  end
  if seen > epoch then
    -- The state is gone (flushed, restarted, expired) or was rebuilt by a
    -- replica that knew less; what this replica saw (`view`: -1 closed, 0
    -- half-open, else the open time it had left) is merged in. What the
    -- store holds was built since the loss, in epochs that cannot be
    -- compared with this replica's, so neither side's epoch decides: open
    -- (or half-open) wins over closed, so that losing the state never
    -- closes a breaker the fleet held open, nor undoes a trip made since.
    -- The epoch moves to at least `seen` (past it when the store's trip
    -- wins over this replica's closed view), so that the replica follows.
    -- A replica that saw nothing (a new one) rebuilds nothing: it never
    -- resets the fleet.
    if view >= 0 then
      epoch, open_until = seen, math.max(open_until, now + view)
    elseif open_until > 0 then
      epoch = seen + 1
    else
      epoch = seen
    end
    slots, slots_at, ok = 0, 0, 0
  end

  local granted = 0
  if open_until == 0 then
    local base = key .. ':' .. epoch .. ':'
    add(base .. math.floor(now / width), 'c', calls, window + width)
    add(base .. math.floor(now / width), 'f', failures, window + width)
    local c, f = window_sum(base, width, window, 'c', 'f')
    local trips
    if rate > 0 then trips = c >= min_calls and f * 100 >= rate * c else trips = f >= threshold end
    if trips then
      epoch, open_until, slots, slots_at, ok = epoch + 1, now + open_for, 0, 0, 0
    end
  elseif now >= open_until then
    -- Half-open: only this epoch's probes decide.
    if seen == epoch then ok = ok + probe_ok end
    if seen == epoch and probe_failed > 0 then
      epoch, open_until, slots, slots_at, ok = epoch + 1, now + open_for, 0, 0, 0
    elseif ok >= to_close then
      epoch, open_until, slots, slots_at, ok = epoch + 1, 0, 0, 0, 0
    elseif want > 0 then
      -- A round whose probes never reported (cancelled) is given up after open_for.
      if slots > 0 and now - slots_at >= open_for then slots = 0 end
      if slots == 0 then slots_at = now end
      granted = math.max(0, math.min(want, max_probes - slots))
      slots = slots + granted
    end
  end
  if st[1] or epoch > 0 then
    redis.call('HSET', key, 'epoch', epoch, 'until', open_until, 'slots', slots, 'slots_at', slots_at, 'ok', ok)
    redis.call('PEXPIRE', key, state_ttl)
  end
  local code, remaining = 0, 0
  if open_until > 0 then
    if now < open_until then code, remaining = 1, open_until - now else code = 2 end
  end
  table.insert(out, epoch)
  table.insert(out, code)
  table.insert(out, remaining)
  table.insert(out, granted)
end

for _ = 1, budgets do
  local name = ARGV[i]
  local window, width = tonumber(ARGV[i + 1]), tonumber(ARGV[i + 2])
  local ratio, floor = tonumber(ARGV[i + 3]), tonumber(ARGV[i + 4])
  local seq, want = tonumber(ARGV[i + 7]), tonumber(ARGV[i + 8])
  local base = prefix .. ':budget:' .. name .. ':'
  local record = prefix .. ':replica:' .. replica .. ':budget:' .. name
  local bucket = base .. math.floor(now / width)
  add(bucket, 'first', delta(record, 'first', tonumber(ARGV[i + 5]), tonumber(ARGV[i + 6])), window + width)
  i = i + 9

  local granted = 0
  local last = redis.call('HMGET', record, 'seq', 'granted')
  if last[1] and tonumber(last[1]) == seq then
    -- The answer to a lease request that timed out on the replica's side.
    granted = tonumber(last[2])
  elseif want > 0 then
    local first, leased = window_sum(base, width, window, 'first', 'leased')
    granted = math.max(0, math.min(want, math.floor(floor + ratio * first) - leased))
    add(bucket, 'leased', granted, window + width)
    redis.call('HSET', record, 'seq', seq, 'granted', granted)
  end
  redis.call('PEXPIRE', record, 2 * window + state_ttl)
  table.insert(out, granted)
end
return out
