"""The Redis store: the replicas' shared sessions, event logs and single-use claims in one Redis.

Strategy: every method is one round trip, either a Lua script (`register_script`: the script runs
atomically in Redis, so a check and the write it guards cannot be split by another replica) or a
MULTI pipeline when no decision depends on what is read. No lock is held between calls and the store
has no thread of its own: callers (many WSGI and worker threads) share redis-py's thread-safe
connection pool.

Keys (`N` is the namespace, `"mcpsync:"` by default, so one Redis can serve several deployments):

- `N session:<id>`: a hash, one field per `SessionRecord` field, each value JSON. Fields are separate
  so `update_session` writes only the fields it is given (HSET) and two replicas changing different
  fields at once both keep theirs, with no read-modify-write.
- `N events:<id>`: a Redis Stream, the session's GET-stream log; each entry's one field `f` is the
  frame. Ids are Redis's own `<ms>-<seq>`, increasing and never reused within a stream (Redis keeps a
  stream's last id even as it trims). XADD trims with `MAXLEN = log_cap`, exact rather than `~`:
  approximate trimming only drops whole radix-tree nodes (up to 100 entries or 4 KB each by
  default), so a log would keep up to a node's worth more than log_cap, while exact trimming at a
  full log removes the one oldest entry per XADD, which is O(1) (Redis marks it deleted in its node
  and frees the node once it is empty).
- `N sessions:fresh` and `N sessions:used`: sorted sets of the live session ids, scored by their
  expiry in ms of the Redis server's clock. "Fresh" ones were never loaded since `create_session`
  (the first to evict at the cap: the lowest score is the one that has waited longest); a load moves
  a session to "used". Redis cannot expire a member of a set, so the scripts first drop members
  whose score has passed (ZREMRANGEBYSCORE) before they count or list them.
- `N caller:<principal key as JSON>`: a sorted set of one caller's live session ids (`null`: the
  unauthenticated), scored like the two above, so `create_session` counts a caller's sessions in
  O(log n) and finds its oldest fresh one (to the millisecond of Redis's clock: of two created in
  the same one, the lower id counts as older); a load and a delete find it from the hash's
  `principal_key`. The set expires with its caller's last session (PEXPIREAT its highest score).
- `N claim:<key>`: a string set with NX and PX, Redis's own one-time mark.
- `N change:<id>`: the mark of a change `append_events` logged (its caller's id for it), so a retry
  of an append that timed out but ran does not log it twice. It lives as long as the longest
  remaining ttl of the sessions it reached: one key per change, not per session.

Expiry is Redis's: the hash and the stream carry the same absolute expiry (PEXPIREAT from
`create_session` and `load_session`; an append gives the stream its hash's PEXPIRETIME, which a
Redis before 7 lacks: there the remaining PTTL, which may be a millisecond off), which is
also the session's score in its sorted set. The scripts read the time with Redis's TIME rather than taking it
from the caller, because the replicas' clocks differ: an expiry computed by one replica and compared
by another would make a session live longer or shorter than its ttl by their skew, while one clock
(the one Redis also expires keys by) keeps the hash, the stream and the scores in step. The caller
passes only the ttl. Since Redis 5 a script's writes are replicated as their effects, so TIME in a
script does not make Redis replicas diverge.

Failures: redis-py's retries are off (`Retry(NoBackoff(), 0)`, as in `RedisBus`), so an outage is
seen at the first failed call rather than hidden by silent retries; any Redis error, socket error or
timeout (`socket_timeout` bounds every connect, send and read) is raised as `StoreUnavailable`,
naming Redis by host:port/db only (the URL may hold a password). A connection error or timeout also
drops the pool's idle connections: the pool itself notices a connection Redis closed when it hands it
out, but not one whose peer vanished without closing it (a partition, a host gone), and each of those
would fail once more, a socket_timeout later, after Redis is back. A call still running when the
store is closed raises `StoreUnavailable` too, whatever redis-py raised for the connection closed
under it. A script cache emptied by a Redis restart is refilled by redis-py on the NOSCRIPT error
(two more round trips, once).

Needs Redis 6.2 or later (exclusive XRANGE starts). Not for Redis Cluster: the scripts touch session
keys they derive from the sets (a fresh session to evict, the live ids to list), which Cluster only
allows for keys declared to the script and in one slot.
"""

from __future__ import annotations

import json
import logging
import math
import re
from collections.abc import Mapping
from dataclasses import fields
from typing import TYPE_CHECKING, Any

from .redis import DEFAULT_SOCKET_TIMEOUT, StoreClient
from .store import Creation, SessionRecord, StoreUnavailable

if TYPE_CHECKING:
    from redis.commands.core import Script

__all__ = ["RedisStore"]

log = logging.getLogger("mcpsync")

DEFAULT_NAMESPACE = "mcpsync:"
"""Prefixed to every key (the same default as `RedisBus`'s channels)."""
DEFAULT_LOG_CAP = 256
"""Events kept per session log (as `MemoryStore`)."""

CHANGE_MARK_FALLBACK = 3600.0
"""Seconds a change's mark lives when no session it reached has an expiry (none should)."""

_FIELDS = frozenset(f.name for f in fields(SessionRecord))
_FRAME = b"f"
_MAX_ID_PART = 2**64 - 1
_STREAM_ID = re.compile(r"([0-9]{1,20})-([0-9]{1,20})")

# Every script reads the time as Redis's ms: TIME is [seconds, microseconds].
_NOW = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
"""

_CREATE = _NOW + """
-- KEYS: fresh, used, the new session's hash, its stream, its caller's set.
-- ARGV: namespace, id, ttl ms, cap, caller cap (0: none), caller idle ms (-1: none), field, value...
-- Returns 1 created, 0 refused (cap), 2 refused (caller cap).
local ns, id = ARGV[1], ARGV[2]
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
redis.call('ZREMRANGEBYSCORE', KEYS[5], '-inf', now)
-- an id created again replaces its session (and its log), which then does not count against a cap
local before = redis.call('HGET', KEYS[3], 'principal_key')
if before then
  redis.call('ZREM', ns .. 'caller:' .. before, id)
end
redis.call('DEL', KEYS[3], KEYS[4])
redis.call('ZREM', KEYS[1], id)
redis.call('ZREM', KEYS[2], id)
local function evict(victim, owner)
  redis.call('ZREM', KEYS[1], victim)
  redis.call('ZREM', KEYS[2], victim)
  redis.call('DEL', ns .. 'session:' .. victim, ns .. 'events:' .. victim)
  if owner then
    redis.call('ZREM', owner, victim)
  end
end
local mine = redis.call('ZCARD', KEYS[5])
local caller_cap = tonumber(ARGV[5])
if caller_cap > 0 and mine >= caller_cap then
  -- the caller's own fresh session waiting longest: its set in expiry order, the first still fresh
  local own = nil
  for _, sid in ipairs(redis.call('ZRANGE', KEYS[5], 0, -1)) do
    if redis.call('ZSCORE', KEYS[1], sid) then
      own = sid
      break
    end
  end
  -- else its session loaded least recently (none is fresh: the lowest score), if idle long enough
  local idle = tonumber(ARGV[6])
  if not own and idle >= 0 then
    local oldest = redis.call('ZRANGE', KEYS[5], 0, 0, 'WITHSCORES')
    if #oldest > 0 and tonumber(oldest[2]) <= now + tonumber(ARGV[3]) - idle then
      own = oldest[1]
    end
  end
  if not own then
    return 2
  end
  evict(own, KEYS[5])
elseif redis.call('ZCARD', KEYS[1]) + redis.call('ZCARD', KEYS[2]) >= tonumber(ARGV[4]) then
  -- the fresh session waiting longest that may give way: the caller's own, or one whose caller
  -- holds more than this caller will (see Store.create_session)
  local giver, owner = nil, nil
  for _, sid in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do
    local key = redis.call('HGET', ns .. 'session:' .. sid, 'principal_key')
    if not key then
      giver = sid  -- its hash is gone (evicted under maxmemory): its place is free
      break
    end
    owner = ns .. 'caller:' .. key
    if owner == KEYS[5] or redis.call('ZCOUNT', owner, '(' .. now, '+inf') > mine + 1 then
      giver = sid
      break
    end
    owner = nil
  end
  if not giver then
    return 0
  end
  evict(giver, owner)
end
local at = now + tonumber(ARGV[3])
redis.call('HSET', KEYS[3], unpack(ARGV, 7))
redis.call('PEXPIREAT', KEYS[3], at)
redis.call('ZADD', KEYS[1], at, id)
redis.call('ZADD', KEYS[5], at, id)
local last = redis.call('ZRANGE', KEYS[5], -1, -1, 'WITHSCORES')
redis.call('PEXPIREAT', KEYS[5], last[2])  -- the set ends with its caller's last session
return 1
"""

_LOAD = _NOW + """
-- KEYS: hash, stream, fresh, used. ARGV: id, ttl ms, namespace.
local data = redis.call('HGETALL', KEYS[1])
redis.call('ZREM', KEYS[3], ARGV[1])
if #data == 0 then
  redis.call('ZREM', KEYS[4], ARGV[1])
  return false
end
local at = now + tonumber(ARGV[2])
redis.call('PEXPIREAT', KEYS[1], at)
redis.call('PEXPIREAT', KEYS[2], at)
redis.call('ZADD', KEYS[4], at, ARGV[1])
for i = 1, #data, 2 do
  if data[i] == 'principal_key' then
    local owner = ARGV[3] .. 'caller:' .. data[i + 1]
    redis.call('ZADD', owner, at, ARGV[1])
    local last = redis.call('ZRANGE', owner, -1, -1, 'WITHSCORES')
    redis.call('PEXPIREAT', owner, last[2])
  end
end
return data
"""

_DELETE = """
-- KEYS: hash, stream, fresh, used. ARGV: namespace, id. Returns 1 if the hash existed.
local key = redis.call('HGET', KEYS[1], 'principal_key')
if key then
  redis.call('ZREM', ARGV[1] .. 'caller:' .. key, ARGV[2])
end
local existed = redis.call('DEL', KEYS[1])
redis.call('DEL', KEYS[2])
redis.call('ZREM', KEYS[3], ARGV[2])
redis.call('ZREM', KEYS[4], ARGV[2])
return existed
"""

_UPDATE = """
-- KEYS: hash. ARGV: field, value... Only a live hash: HSET on a missing key would create one with no
-- expiry (a deleted or expired session brought back for good).
if redis.call('EXISTS', KEYS[1]) == 0 then
  return 0
end
redis.call('HSET', KEYS[1], unpack(ARGV))
return 1
"""

_CHANGE_SUBSCRIPTION = """
-- KEYS: hash. ARGV: uri, '1' to subscribe or '0' to unsubscribe. One step, so two replicas
-- changing one session's subscriptions at once both keep theirs; only a live hash, as _UPDATE.
if redis.call('EXISTS', KEYS[1]) == 0 then
  return 0
end
local raw = redis.call('HGET', KEYS[1], 'subscriptions')
local held = {}
if raw then
  for _, uri in ipairs(cjson.decode(raw)) do
    if uri ~= ARGV[1] then
      held[#held + 1] = uri
    end
  end
end
if ARGV[2] == '1' then
  held[#held + 1] = ARGV[1]
end
table.sort(held)
local encoded = '[]'
if #held > 0 then
  encoded = cjson.encode(held)
end
redis.call('HSET', KEYS[1], 'subscriptions', encoded)
return 1
"""

_SUBSCRIPTIONS = _NOW + """
-- KEYS: fresh, used. ARGV: namespace. Returns id, subscriptions JSON, id, ...
local out = {}
for _, set in ipairs(KEYS) do
  redis.call('ZREMRANGEBYSCORE', set, '-inf', now)
  for _, id in ipairs(redis.call('ZRANGE', set, 0, -1)) do
    local key = ARGV[1] .. 'session:' .. id
    local subscriptions = redis.call('HGET', key, 'subscriptions')
    if subscriptions then
      out[#out + 1] = id
      out[#out + 1] = subscriptions
    elseif redis.call('EXISTS', key) == 1 then
      out[#out + 1] = id
      out[#out + 1] = '[]'
    else
      redis.call('ZREM', set, id)  -- its hash is gone (evicted under maxmemory): mend the index
    end
  end
end
return out
"""

_APPEND = """
-- KEYS: hash, stream, hash, stream... ARGV: log cap, change mark key or '', frame, frame... Returns
-- each new id, or false. The hash's existence and the XADD are one step: a session deleted meanwhile
-- cannot get a stream that nothing would ever expire or delete. A change already marked was appended
-- by an earlier call (one that timed out in the caller but ran here): nothing is appended again.
local out = {}
if ARGV[2] ~= '' and redis.call('EXISTS', ARGV[2]) == 1 then
  for i = 1, #KEYS, 2 do
    out[#out + 1] = false
  end
  return out
end
local longest = 0
for i = 1, #KEYS, 2 do
  local ttl = redis.call('PTTL', KEYS[i])
  if ttl == -2 then
    out[#out + 1] = false
  else
    out[#out + 1] = redis.call('XADD', KEYS[i + 1], 'MAXLEN', '=', ARGV[1], '*', 'f', ARGV[(i + 1) / 2 + 2])
    if ttl > 0 then
      -- the hash's own absolute expiry (Redis 7+); an older Redis has only the rounded PTTL
      local known, at = pcall(redis.call, 'PEXPIRETIME', KEYS[i])
      if known and type(at) == 'number' and at > 0 then
        redis.call('PEXPIREAT', KEYS[i + 1], at)
      else
        redis.call('PEXPIRE', KEYS[i + 1], ttl)
      end
    else
      ttl = tonumber(ARGV[3 + #KEYS / 2])
    end
    longest = math.max(longest, ttl)
  end
end
if ARGV[2] ~= '' and longest > 0 then
  redis.call('SET', ARGV[2], '1', 'PX', longest)
end
return out
"""


def _ms(seconds: float) -> int:
    """A ttl in whole ms, rounded up: a positive ttl never becomes 0 (which would expire at once)."""
    return max(0, math.ceil(seconds * 1000))


def _encode(name: str, value: Any) -> str:
    return json.dumps(sorted(value) if name == "subscriptions" else value, separators=(",", ":"), ensure_ascii=False)


class RedisStore:
    """A `Store` in Redis; see the module docstring for the keys, the expiry and the failures.

    Args:
        url: `redis://[[user]:password@]HOST[:PORT][/DB]` or `rediss://...`, with redis-py's URL options.
        namespace: prefixed to every key in Redis (the same default as `RedisBus`'s channels).
        socket_timeout: seconds any one Redis operation (connect, send, read) may take before the
            call raises `StoreUnavailable`.
        log_cap: events kept per session log.

    Raises:
        ValueError: a malformed URL (the message does not repeat it), a non-positive timeout or cap.
        ImportError: the `redis` package is not installed (`pip install 'mcpsync[redis]'`).
    """

    def __init__(
        self,
        url: str,
        *,
        namespace: str = DEFAULT_NAMESPACE,
        socket_timeout: float = DEFAULT_SOCKET_TIMEOUT,
        log_cap: int = DEFAULT_LOG_CAP,
    ) -> None:
        if socket_timeout <= 0:
            raise ValueError("socket_timeout must be positive")
        if log_cap < 1:
            raise ValueError("log_cap must be at least 1")
        self._redis = StoreClient(url, socket_timeout, "store")
        self.address = self._redis.address
        self._client = self._redis.client
        self._ns = namespace
        self._fresh = f"{namespace}sessions:fresh"
        self._used = f"{namespace}sessions:used"
        self._log_cap = log_cap
        # register_script only hashes the text here; each is sent to Redis on its first NOSCRIPT
        self._create: Script = self._client.register_script(_CREATE)
        self._load: Script = self._client.register_script(_LOAD)
        self._delete: Script = self._client.register_script(_DELETE)
        self._update: Script = self._client.register_script(_UPDATE)
        self._change_subscription: Script = self._client.register_script(_CHANGE_SUBSCRIPTION)
        self._subscriptions: Script = self._client.register_script(_SUBSCRIPTIONS)
        self._append: Script = self._client.register_script(_APPEND)

    def _session(self, session_id: str) -> str:
        return f"{self._ns}session:{session_id}"

    def _events(self, session_id: str) -> str:
        return f"{self._ns}events:{session_id}"

    def _caller(self, principal_key: str | None) -> str:
        """The set of a caller's live sessions: named by the key as the hash holds it (JSON), so
        a script finds it from a session's hash, and None (everyone, unauthenticated) has its own."""
        return f"{self._ns}caller:{_encode('principal_key', principal_key)}"

    # -- sessions --------------------------------------------------------------------------------
    def create_session(
        self,
        session_id: str,
        record: SessionRecord,
        *,
        ttl: float,
        cap: int,
        caller_cap: int | None = None,
        caller_idle: float | None = None,
    ) -> Creation:
        """See `Store.create_session`. One script: prune, then the caller's bound (its set, in
        expiry order, gives its first still fresh, else its lowest score if idle long enough), else the shared one (the fresh set in expiry
        order, each one's caller counted by its set), evict or refuse, then write the hash, its
        expiry and its place in "fresh" and in its caller's set. An id created again replaces that
        session, its log included."""
        pairs = [item for name, value in record.to_json().items() for item in (name, _encode(name, value))]
        bound = 0 if caller_cap is None or record.principal_key is None else caller_cap
        with self._redis.reaching():
            created = self._create(
                keys=[self._fresh, self._used, self._session(session_id), self._events(session_id), self._caller(record.principal_key)],
                args=[self._ns, session_id, _ms(ttl), cap, bound, -1 if caller_idle is None else _ms(caller_idle), *pairs],
            )
        return {1: Creation.CREATED, 2: Creation.CALLER_FULL}.get(int(created), Creation.FULL)

    def load_session(self, session_id: str, *, ttl: float) -> SessionRecord | None:
        """See `Store.load_session`. One script: read the hash, push the hash's and the stream's
        expiry, move the id from "fresh" to "used". A corrupt record is logged (never its content),
        deleted (else, loaded again and again, it would hold a place under the cap for good) and
        answered as missing."""
        with self._redis.reaching():
            data = self._load(
                keys=[self._session(session_id), self._events(session_id), self._fresh, self._used],
                args=[session_id, _ms(ttl), self._ns],
            )
        if not data:
            return None
        try:
            it = iter(data)
            return SessionRecord.from_json({bytes(name).decode(): json.loads(value) for name, value in zip(it, it, strict=True)})
        except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
            log.warning("store: a session record in Redis at %s is corrupt (%s); it is deleted and treated as missing",
                        self.address, type(exc).__name__)
        try:
            self.delete_session(session_id)
        except StoreUnavailable:
            pass  # it expires with its ttl all the same
        return None

    def update_session(self, session_id: str, **changes: Any) -> None:
        """See `Store.update_session`. HSET of the named fields only, in a script that first checks
        the hash exists (a missing session is not created again). Raises TypeError for a name that
        is not a `SessionRecord` field, as `MemoryStore` does."""
        unknown = set(changes) - _FIELDS
        if unknown:
            raise TypeError(f"not SessionRecord fields: {', '.join(sorted(unknown))}")
        if not changes:
            return
        pairs = [item for name, value in changes.items() for item in (name, _encode(name, value))]
        with self._redis.reaching():
            self._update(keys=[self._session(session_id)], args=pairs)

    def change_subscription(self, session_id: str, uri: str, subscribed: bool) -> None:
        """See `Store.change_subscription`. A script: read the set, change it, write it back, in
        one step."""
        with self._redis.reaching():
            self._change_subscription(keys=[self._session(session_id)], args=[uri, "1" if subscribed else "0"])

    def delete_session(self, session_id: str) -> bool:
        """See `Store.delete_session`. One script: the hash, the stream, the id in both sets and in
        its caller's (named by the hash, so read first)."""
        with self._redis.reaching():
            deleted = self._delete(
                keys=[self._session(session_id), self._events(session_id), self._fresh, self._used], args=[self._ns, session_id]
            )
        return bool(deleted)

    def session_subscriptions(self) -> dict[str, frozenset[str]]:
        """See `Store.session_subscriptions`. One script over both sets: O(live sessions), and Redis
        serves nobody else meanwhile (measured: 34 ms for 20,000 sessions, Redis 7.0 on loopback)."""
        with self._redis.reaching():
            flat = self._subscriptions(keys=[self._fresh, self._used], args=[self._ns])
        found: dict[str, frozenset[str]] = {}
        corrupt = 0
        it = iter(flat)
        for raw_id, raw_subscriptions in zip(it, it, strict=True):
            try:
                subscriptions = json.loads(raw_subscriptions)
                if not isinstance(subscriptions, list) or not all(isinstance(uri, str) for uri in subscriptions):
                    raise ValueError("not a list of URIs")
                found[bytes(raw_id).decode()] = frozenset(subscriptions)
            except ValueError:
                corrupt += 1
        if corrupt:
            log.warning("store: %d session record(s) in Redis at %s have corrupt subscriptions; left out", corrupt, self.address)
        return found

    # -- event logs ------------------------------------------------------------------------------
    def append_events(self, frames: Mapping[str, bytes], *, change: str | None = None) -> dict[str, str]:
        """See `Store.append_events`. One script for every session: for each whose hash exists, XADD
        (exact MAXLEN) and give the stream the hash's remaining ttl. In one script rather than
        XADD NOMKSTREAM after a check, because a session deleted between the check and the first
        XADD would leave a stream nothing expires. A `change` is marked in the same script (`N
        change:<id>`, SET PX the longest remaining ttl of the sessions it reached), and a marked one
        is not appended again."""
        if not frames:
            return {}
        ids = list(frames)
        keys = [key for sid in ids for key in (self._session(sid), self._events(sid))]
        mark = "" if change is None else f"{self._ns}change:{change}"
        with self._redis.reaching():
            added = self._append(keys=keys, args=[self._log_cap, mark, *(frames[sid] for sid in ids), _ms(CHANGE_MARK_FALLBACK)])
        return {sid: bytes(event_id).decode() for sid, event_id in zip(ids, added, strict=True) if event_id is not None}

    def events_after(self, session_id: str, after: str | None, limit: int) -> list[tuple[str, bytes]]:
        """See `Store.events_after`. One MULTI: the hash's existence (a log ends with its session) and
        XRANGE from just after `after`. An `after` not of the form `<ms>-<seq>` counts as None."""
        if limit <= 0:
            return []
        start = "-"
        match = _STREAM_ID.fullmatch(after) if after is not None else None
        if match is not None and all(int(part) <= _MAX_ID_PART for part in match.groups()):
            if int(match[1]) == int(match[2]) == _MAX_ID_PART:
                return []  # nothing can follow the largest id (and Redis refuses the range)
            start = f"({after}"
        with self._redis.reaching():
            pipeline = self._client.pipeline(transaction=True)
            pipeline.exists(self._session(session_id))
            pipeline.xrange(self._events(session_id), start, "+", count=limit)
            exists, entries = pipeline.execute()
        if not exists:
            return []
        return [(bytes(event_id).decode(), entry[_FRAME]) for event_id, entry in entries if _FRAME in entry]

    # -- single use ------------------------------------------------------------------------------
    def claim(self, key: str, ttl: float) -> bool:
        """See `Store.claim`. SET NX PX: Redis decides which of two replicas claiming at once wins."""
        with self._redis.reaching():
            claimed = self._client.set(f"{self._ns}claim:{key}", b"1", nx=True, px=max(1, _ms(ttl)))
        return bool(claimed)

    def reachable(self) -> bool:
        """Redis answers a PING now (within `socket_timeout`)."""
        try:
            with self._redis.reaching():
                return bool(self._client.ping())
        except StoreUnavailable:
            return False

    def close(self) -> None:
        """Disconnect every pooled connection; idempotent. Later calls raise `StoreUnavailable`
        rather than quietly opening new connections the owner believes released."""
        self._redis.close()

    def __enter__(self) -> RedisStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
