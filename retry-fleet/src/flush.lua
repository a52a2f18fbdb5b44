-- One flush of one replica, atomically: its totals in, the fleet's verdicts
-- out. Time is the server's (TIME), so replicas' clocks never disagree.
-- Key, argument and answer layout: fleet/script.rs. Every key written gets
-- a TTL.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local prefix, replica = ARGV[1], ARGV[2]
local breakers, budgets = tonumber(ARGV[3]), tonumber(ARGV[4])
local state_ttl = tonumber(ARGV[5])
-- The replica's reckoning of this clock as it sent the flush (0: none
-- yet): the ages of its samples count back from it, so that a flush that
-- waited in a frozen server's queue still dates its counts right.
local sent_at = tonumber(ARGV[6])
if sent_at <= 0 or sent_at > now then sent_at = now end
local out = {now}
local i = 7

-- A stored count or time as a whole number the script's sums keep exact
-- (0 to 2^53), or nil for anything else. The store is not the fleet's
-- alone: a value written there by hand or by another program (`1e300`,
-- `-5`, `x`) must neither make every flush fail or answer nonsense, nor
-- stay for ever, its key's TTL renewed by each flush. Digits only, as
-- the script writes its numbers and as HINCRBY reads them: `5.0`, `1e3`
-- or `0x10` counted here would fail the HINCRBY that hands tokens back.
local function whole(v)
  if type(v) ~= 'string' or not (v == '0' or string.find(v, '^[1-9]%d*$')) then return nil end
  local n = tonumber(v)
  if n <= 2^53 then return n end
  return nil
end

-- The keys this flush found holding no hash, for the replica to report.
local replaced, checked = {}, {}

-- Every key the script reads or writes is a hash: a breaker's state and
-- buckets, a budget's buckets, a replica's records. Each hash command names
-- its key through `hash`, so that one rule covers them all: a key that
-- holds anything else (another program's string, list, ...) is taken as
-- lost, deleted as if it had expired, and named in the answer (the
-- replica says so once: a WARN naming it, a counter). Left there, each
-- command of the script on it failed, and with it every flush, for good:
-- the replicas ran on local state, and no flush gave the key a TTL. Looked
-- at once per flush: from then on only the script writes it.
local function hash(key)
  if not checked[key] then
    checked[key] = true
    local kind = redis.call('TYPE', key)['ok']
    if kind ~= 'hash' and kind ~= 'none' then
      redis.call('DEL', key)
      table.insert(replaced, key)
    end
  end
  return key
end

-- A guard's name as a part of its keys, `%` and `:` escaped (`%25`,
-- `%3A`), so that no name reads as other parts of a key: written as it
-- was, breaker `dep:0:18` had the key of breaker `dep`'s bucket 18 in
-- epoch 0, and breaker `a:breaker:b` of fleet `p` the state of breaker `b`
-- of fleet `p:breaker:a`. A name with neither is written as it is, as
-- before, so that replicas of an older version share its keys.
local function key_part(name)
  return (string.gsub(string.gsub(name, '%%', '%%25'), ':', '%%3A'))
end

-- The prefix of a breaker's buckets in `epoch`, the epoch written with
-- `%d`: Lua writes a number of 15 digits or more as `1e+15`, which made
-- the buckets of the epochs around one that far on (written by hand, at
-- one per transition) one another's.
local function buckets_of(key, epoch)
  return key .. ':' .. string.format('%d', epoch) .. ':'
end

-- HINCRBY, but a field holding no integer (see `whole`) is replaced by
-- `n`, rather than failing every flush until its key expires.
local function increment(key, field, n)
  if type(redis.pcall('HINCRBY', hash(key), field, n)) == 'table' then redis.call('HSET', hash(key), field, n) end
end

-- What a replica's cumulative total adds since the last flush the server
-- applied (its record; the replica's own acknowledged total when the
-- record is gone). Resending a total adds nothing: a flush that timed out
-- on the replica's side but ran here is not counted twice. The record only
-- grows: a stale flush that runs late (queued on a connection the replica
-- has since remade) must not wind it back, or the next flush would count
-- again what was counted since.
local function delta(record, field, total, acked)
  local last = whole(redis.call('HGET', hash(record), field)) or acked
  if total > last then
    redis.call('HSET', hash(record), field, total)
    return total - last
  end
  return 0
end

-- A backlog at ARGV[at] (see fleet/backlog.rs): how many samples, then each
-- one's age and `columns` totals. Per column, the samples as {time, total},
-- oldest first, then the replica's total now (`totals`); and the index
-- past the backlog.
local function samples(at, columns, totals)
  local k = tonumber(ARGV[at])
  local columns_of = {}
  for c = 1, columns do columns_of[c] = {} end
  for j = 0, k - 1 do
    local s = at + 1 + j * (columns + 1)
    local time = sent_at - tonumber(ARGV[s])
    for c = 1, columns do table.insert(columns_of[c], {time, tonumber(ARGV[s + c])}) end
  end
  for c = 1, columns do table.insert(columns_of[c], {sent_at, totals[c]}) end
  return columns_of, at + 1 + k * (columns + 1)
end

-- What a replica's cumulative total adds since the last flush the server
-- applied, as `delta` reckons it, in parts dated by its samples: each
-- sample's part is what it adds to the one before, made by its time.
local function parts(record, field, acked, samples_of_field)
  local last = whole(redis.call('HGET', hash(record), field)) or acked
  local made = {}
  for _, sample in ipairs(samples_of_field) do
    if sample[2] > last then
      table.insert(made, {sample[1], sample[2] - last})
      last = sample[2]
    end
  end
  if #made > 0 then redis.call('HSET', hash(record), field, last) end
  return made
end

-- Two fields summed over the buckets that make up the window ending now.
local function window_sum(base, width, window, a_field, b_field)
  local current = math.floor(now / width)
  local a, b = 0, 0
  for id = current - math.ceil(window / width) + 1, current do
    local v = redis.call('HMGET', hash(base .. id), a_field, b_field)
    a = a + (whole(v[1]) or 0)
    b = b + (whole(v[2]) or 0)
  end
  return a, b
end

local function add(bucket, field, n, ttl)
  if n > 0 then
    increment(bucket, field, n)
    redis.call('PEXPIRE', bucket, ttl)
  end
end

-- Adds each part to the bucket of its time under `base`, but none made
-- before the window that ends now, nor before `since` (when the breaker's
-- epoch began): what a replica counted while it could not flush is
-- counted where it happened, and an outage's worth is not a burst now.
local function place(base, field, made, width, window, since)
  local oldest = math.floor(now / width) - math.ceil(window / width) + 1
  for _, part in ipairs(made) do
    local id = math.floor(part[1] / width)
    if part[1] >= since and id >= oldest then add(base .. id, field, part[2], window + width) end
  end
end

-- Moves the window's counts from the buckets under `from` to those under
-- `to`: a rebuild that changes the epoch of a closed fleet keeps what was
-- counted in it.
local function carry(from, to, width, window)
  local current = math.floor(now / width)
  for id = current - math.ceil(window / width) + 1, current do
    local v = redis.call('HMGET', hash(from .. id), 'c', 'f')
    add(to .. id, 'c', whole(v[1]) or 0, window + width)
    add(to .. id, 'f', whole(v[2]) or 0, window + width)
    redis.call('DEL', from .. id)
  end
end

for _ = 1, breakers do
  local name = key_part(ARGV[i])
  local window, width = tonumber(ARGV[i + 1]), tonumber(ARGV[i + 2])
  local threshold, rate, min_calls = tonumber(ARGV[i + 3]), tonumber(ARGV[i + 4]), tonumber(ARGV[i + 5])
  local open_for, max_probes, to_close = tonumber(ARGV[i + 6]), tonumber(ARGV[i + 7]), tonumber(ARGV[i + 8])
  local seen, want, view = tonumber(ARGV[i + 9]), tonumber(ARGV[i + 10]), tonumber(ARGV[i + 11])
  local key = prefix .. ':breaker:' .. name
  local record = prefix .. ':replica:' .. replica .. ':breaker:' .. name
  -- The sequence number of this replica's request for probe slots: sent
  -- again (its flush timed out on the replica's side), it gets the answer
  -- the first one got here, as a lease request does.
  local seq = tonumber(ARGV[i + 20])
  local counted, after = samples(i + 21, 2, {tonumber(ARGV[i + 12]), tonumber(ARGV[i + 13])})
  local calls = parts(record, 'c', tonumber(ARGV[i + 16]), counted[1])
  local failures = parts(record, 'f', tonumber(ARGV[i + 17]), counted[2])
  -- Probe outcomes are not bucketed: only the round's epoch decides them.
  local probe_ok = delta(record, 'pok', tonumber(ARGV[i + 14]), tonumber(ARGV[i + 18]))
  local probe_failed = delta(record, 'pf', tonumber(ARGV[i + 15]), tonumber(ARGV[i + 19]))
  redis.call('PEXPIRE', record, 2 * window + state_ttl)
  i = after

  local st = redis.call('HMGET', hash(key), 'epoch', 'until', 'slots', 'slots_at', 'ok', 'since')
  local epoch, open_until, slots, slots_at, ok, since = 0, 0, 0, 0, 0, 0
  local held = st[1] ~= false
  if held then
    epoch, open_until = whole(st[1]), whole(st[2])
    slots, slots_at, ok = whole(st[3]), whole(st[4]), whole(st[5])
    -- A state written before `since` was kept has none.
    if st[6] == false then since = 0 else since = whole(st[6]) end
    if not (epoch and open_until and slots and slots_at and ok and since) then
      -- Not the script's writing: the state is lost, as if flushed, and
      -- rebuilt below from what this replica saw of the fleet.
      redis.call('DEL', key)
      held, epoch, open_until, slots, slots_at, ok, since = false, 0, 0, 0, 0, 0, 0
    end
    -- The script writes no time later than the server's now; one that is
    -- (written by hand, or the server's clock stepped back) is taken as
    -- now. Kept, a `since` past every count's time would keep the fleet
    -- from counting any, and a `slots_at` in the future a round that never
    -- reported from being given up, for as long as flushes renew the state.
    since, slots_at = math.min(since, now), math.min(slots_at, now)
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
    -- resets the fleet. Closed over closed, what the store counted since
    -- the loss (a new replica's calls, or those since a rebuild by a
    -- replica that knew less) moves to the new epoch's buckets: counted in
    -- a closed fleet, it is its window's still.
    local closed_from = open_until == 0 and buckets_of(key, epoch)
    if view >= 0 then
      epoch, open_until = seen, math.max(open_until, now + view)
    elseif open_until > 0 then
      epoch = seen + 1
    else
      epoch = seen
    end
    if closed_from and open_until == 0 then carry(closed_from, buckets_of(key, epoch), width, window) end
    -- When the rebuilt epoch began is not known.
    slots, slots_at, ok, since = 0, 0, 0, 0
  end

  local granted = 0
  if open_until == 0 then
    local base = buckets_of(key, epoch)
    place(base, 'c', calls, width, window, since)
    place(base, 'f', failures, width, window, since)
    local c, f = window_sum(base, width, window, 'c', 'f')
    local trips
    if rate > 0 then trips = c >= min_calls and f * 100 >= rate * c else trips = f >= threshold end
    if trips then
      epoch, since, open_until, slots, slots_at, ok = epoch + 1, now, now + open_for, 0, 0, 0
    end
  elseif now >= open_until then
    -- Half-open: only this epoch's probes decide.
    if seen == epoch then ok = ok + probe_ok end
    if seen == epoch and probe_failed > 0 then
      epoch, since, open_until, slots, slots_at, ok = epoch + 1, now, now + open_for, 0, 0, 0
    elseif ok >= to_close then
      epoch, since, open_until, slots, slots_at, ok = epoch + 1, now, 0, 0, 0, 0
    else
      -- A round whose probes never reported (cancelled) is given up after open_for.
      if slots > 0 and now - slots_at >= open_for then slots = 0 end
      -- A request sent again (its flush timed out on the replica's side but
      -- ran here) gets the slots it was granted, while their round (the
      -- epoch, and when its first slot was granted) lasts: granted anew,
      -- the fleet would send more probes than the round's; not at all, the
      -- slots would be lost until the round is given up, and every replica
      -- held back until then.
      local asked = redis.call('HMGET', hash(record), 'pseq', 'pepoch', 'pround', 'pgranted')
      if slots > 0 and whole(asked[1]) == seq and whole(asked[2]) == epoch and whole(asked[3]) == slots_at then
        granted = math.min(whole(asked[4]) or 0, slots)
      elseif want > 0 then
        if slots == 0 then slots_at = now end
        granted = math.max(0, math.min(want, max_probes - slots))
        slots = slots + granted
        if granted > 0 then
          redis.call('HSET', hash(record), 'pseq', seq, 'pepoch', epoch, 'pround', slots_at, 'pgranted', granted)
        end
      end
    end
  end
  if held or epoch > 0 then
    redis.call('HSET', hash(key), 'epoch', epoch, 'since', since, 'until', open_until, 'slots', slots, 'slots_at', slots_at, 'ok', ok)
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

-- Hands back `n` unused tokens a replica leased (its lease ended: the store
-- went away, or it left), from its own grants still in the window, newest
-- first: a lease is spent oldest first, so what is left was granted last.
-- Never more than it was granted in a bucket, nor than the bucket counts:
-- a token granted before the window, or lost with the store's state, is
-- no longer counted, and handing it back would count it twice.
local function hand_back(base, record, n, width, window)
  local current = math.floor(now / width)
  local id = current
  while n > 0 and id > current - math.ceil(window / width) do
    local bucket, field = base .. id, 'g:' .. id
    local mine = whole(redis.call('HGET', hash(record), field)) or 0
    local counted = whole(redis.call('HGET', hash(bucket), 'leased')) or 0
    local back = math.min(n, mine, counted)
    if back > 0 then
      redis.call('HINCRBY', hash(bucket), 'leased', -back)
      redis.call('HINCRBY', hash(record), field, -back)
      n = n - back
    end
    id = id - 1
  end
end

-- Notes `granted` tokens leased to a replica now (what it may hand back),
-- and forgets its grants older than the window.
local function note_grant(record, granted, width, window)
  local current = math.floor(now / width)
  increment(record, 'g:' .. current, granted)
  for _, field in ipairs(redis.call('HKEYS', hash(record))) do
    local id = string.sub(field, 1, 2) == 'g:' and tonumber(string.sub(field, 3))
    if id and id <= current - math.ceil(window / width) then redis.call('HDEL', hash(record), field) end
  end
end

for _ = 1, budgets do
  local name = key_part(ARGV[i])
  local window, width = tonumber(ARGV[i + 1]), tonumber(ARGV[i + 2])
  local ratio, floor = tonumber(ARGV[i + 3]), tonumber(ARGV[i + 4])
  local seq, want = tonumber(ARGV[i + 7]), tonumber(ARGV[i + 8])
  local base = prefix .. ':budget:' .. name .. ':'
  local record = prefix .. ':replica:' .. replica .. ':budget:' .. name
  local bucket = base .. math.floor(now / width)
  local firsts, after = samples(i + 11, 1, {tonumber(ARGV[i + 5])})
  place(base, 'first', parts(record, 'first', tonumber(ARGV[i + 6]), firsts[1]), width, window, 0)
  -- Handed back before a lease is granted: this flush may lease them again.
  hand_back(base, record, delta(record, 'ret', tonumber(ARGV[i + 9]), tonumber(ARGV[i + 10])), width, window)

  local granted = 0
  local last = redis.call('HMGET', hash(record), 'seq', 'granted')
  if last[1] and whole(last[1]) == seq then
    -- The answer to a lease request that timed out on the replica's side
    -- (none, when the record's is not the script's writing).
    granted = whole(last[2]) or 0
  elseif want > 0 then
    local first, leased = window_sum(base, width, window, 'first', 'leased')
    granted = math.max(0, math.min(want, math.floor(floor + ratio * first) - leased))
    add(bucket, 'leased', granted, window + width)
    if granted > 0 then note_grant(record, granted, width, window) end
    redis.call('HSET', hash(record), 'seq', seq, 'granted', granted)
  end
  redis.call('PEXPIRE', record, 2 * window + state_ttl)
  i = after
  table.insert(out, granted)
end
-- Last, the keys replaced (see `hash`): an array of their names.
table.insert(out, replaced)
return out
