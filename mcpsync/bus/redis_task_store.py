"""The Redis task store: task records in one Redis, so every replica answers about every task.

Strategy: as `RedisStore` for sessions (see its docstring for the failures, the clock and why no
Cluster): every method is one round trip, a Lua script wherever a decision depends on what is read
(the count and the write of `create_task`, the terminal check and the write of `save_task`, the
cursor and the page of `list_tasks`), so two replicas never split a check from the write it
guards; no lock is held between calls and the store has no thread.

Keys (`N` is the namespace, `"mcpsync:"` by default as `RedisStore`'s, whose keys these never meet;
two deployments on one Redis differ by database or namespace):

- `N task:<id>`: a string, the record's JSON (`TaskRecord.to_json`). It expires with the task
  (PEXPIREAT `created_at` + `ttl_ms`); a record without a ttl never does.
- `N tasks:expiry`: a sorted set of every live task's id scored by that expiry in ms (`+inf`: none),
  the count `cap` bounds.
- `N tasks:owner:<owner as JSON>`: the same, for one owner's tasks (`null`: the unauthenticated),
  the count `owner_cap` bounds.
- `N tasks:order:<owner as JSON>`: the owner's ids scored by a creation number (`N tasks:seq`,
  INCR in the creating script), the order `tasks/list` pages in; a cursor is a task id, found by
  ZRANK. The two owner sets expire with the owner's last task.

Redis cannot expire a member of a set, so the scripts first drop the members whose score has
passed (by Redis's TIME, the clock Redis expires the records by) before they count or page.

Why the expiry comes from the record rather than from Redis's clock at creation: a task's ttl counts
from its `createdAt`, which the client is shown and which the runner set; one absolute time for the
key and the scores keeps them in step with each other, and the runner's clock differs from Redis's
only by the replicas' skew, small beside a ttl of minutes.

A record evicted under `maxmemory` (its key gone before its score passed) is mended where it is met:
`list_tasks` drops it from the sets; until then it counts against the caps.
"""

from __future__ import annotations

import json
import logging
import math
from typing import TYPE_CHECKING

from ..tasks.record import TERMINAL, TaskRecord
from .redis import DEFAULT_SOCKET_TIMEOUT, StoreClient
from .store import Creation

if TYPE_CHECKING:
    from redis.commands.core import Script

__all__ = ["RedisTaskStore"]

log = logging.getLogger("mcpsync")

DEFAULT_NAMESPACE = "mcpsync:"
"""Prefixed to every key (the same default as `RedisStore` and `RedisBus`)."""

# Every script reads the time as Redis's ms (TIME is [seconds, microseconds]) and can drop an
# owner's expired ids from both of its sets.
_PRUNE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local function prune(by_expiry, by_order)
  for _, id in ipairs(redis.call('ZRANGEBYSCORE', by_expiry, '-inf', now)) do
    redis.call('ZREM', by_order, id)
  end
  redis.call('ZREMRANGEBYSCORE', by_expiry, '-inf', now)
end
"""

_CREATE = _PRUNE + """
-- KEYS: the record, every task's expiry set, the owner's expiry set, its order set, the sequence.
-- ARGV: id, JSON, expiry ms ('' for none), cap, owner cap. Returns 1 created, 0 full, 2 owner full.
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
prune(KEYS[3], KEYS[4])
if redis.call('ZCARD', KEYS[3]) >= tonumber(ARGV[5]) then
  return 2
end
if redis.call('ZCARD', KEYS[2]) >= tonumber(ARGV[4]) then
  return 0
end
local score = '+inf'
redis.call('SET', KEYS[1], ARGV[2])
if ARGV[3] ~= '' then
  score = ARGV[3]
  redis.call('PEXPIREAT', KEYS[1], ARGV[3])
end
redis.call('ZADD', KEYS[2], score, ARGV[1])
redis.call('ZADD', KEYS[3], score, ARGV[1])
redis.call('ZADD', KEYS[4], redis.call('INCR', KEYS[5]), ARGV[1])
-- the owner's sets end with its last task (never, while it holds one without a ttl)
local last = redis.call('ZRANGE', KEYS[3], -1, -1, 'WITHSCORES')[2]
if last == 'inf' then
  redis.call('PERSIST', KEYS[3])
  redis.call('PERSIST', KEYS[4])
else
  redis.call('PEXPIREAT', KEYS[3], last)
  redis.call('PEXPIREAT', KEYS[4], last)
end
return 1
"""

_SAVE = """
-- KEYS: the record. ARGV: the new JSON, then the terminal statuses. Returns the stored JSON when it
-- is terminal (and is kept), else 0 (written, or gone: a task past its ttl is not brought back).
-- KEEPTTL: the record keeps the expiry its creation set.
local raw = redis.call('GET', KEYS[1])
if not raw then
  return 0
end
local ok, stored = pcall(cjson.decode, raw)
if ok and type(stored) == 'table' then
  for i = 2, #ARGV do
    if stored['status'] == ARGV[i] then
      return raw
    end
  end
end
redis.call('SET', KEYS[1], ARGV[1], 'KEEPTTL')
return 0
"""

_LIST = _PRUNE + """
-- KEYS: the owner's expiry set, its order set, every task's expiry set.
-- ARGV: namespace, the cursor ('' for none), how many records to return.
-- Returns the records' JSON in creation order, or false when the cursor is no live task of the owner.
prune(KEYS[1], KEYS[2])
local at = 0
if ARGV[2] ~= '' then
  local rank = redis.call('ZRANK', KEYS[2], ARGV[2])
  if not rank then
    return false
  end
  at = rank + 1
end
local want = tonumber(ARGV[3])
local out, stale = {}, {}
while #out < want do
  local ids = redis.call('ZRANGE', KEYS[2], at, at + want - 1)
  if #ids == 0 then
    break
  end
  for _, id in ipairs(ids) do
    local raw = redis.call('GET', ARGV[1] .. 'task:' .. id)
    if not raw then
      stale[#stale + 1] = id
    elseif #out < want then
      out[#out + 1] = raw
    end
  end
  at = at + #ids
end
for _, id in ipairs(stale) do  -- evicted before its time: no longer counted
  redis.call('ZREM', KEYS[1], id)
  redis.call('ZREM', KEYS[2], id)
  redis.call('ZREM', KEYS[3], id)
end
return out
"""


def _record(raw: bytes | str) -> TaskRecord | None:
    """The record a key holds; None (logged, never its content) for a corrupt one."""
    try:
        return TaskRecord.from_json(json.loads(raw))
    except (ValueError, KeyError, TypeError) as exc:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        log.warning("task store: a task record in Redis is corrupt (%s); treated as missing", type(exc).__name__)
        return None


class RedisTaskStore:
    """A `TaskStore` in Redis; see the module docstring for the keys, the expiry and the failures.

    Args:
        url: `redis://[[user]:password@]HOST[:PORT][/DB]` or `rediss://...`, with redis-py's URL options.
        namespace: prefixed to every key in Redis.
        socket_timeout: seconds any one Redis operation (connect, send, read) may take before the
            call raises `StoreUnavailable`.

    Raises:
        ValueError: a malformed URL (the message does not repeat it) or a non-positive timeout.
        ImportError: the `redis` package is not installed (`pip install 'mcpsync[redis]'`).
    """

    def __init__(self, url: str, *, namespace: str = DEFAULT_NAMESPACE, socket_timeout: float = DEFAULT_SOCKET_TIMEOUT) -> None:
        if socket_timeout <= 0:
            raise ValueError("socket_timeout must be positive")
        self._redis = StoreClient(url, socket_timeout, "task store")
        self.address = self._redis.address
        self._client = self._redis.client
        self._ns = namespace
        self._expiry = f"{namespace}tasks:expiry"
        # register_script only hashes the text here; each is sent to Redis on its first NOSCRIPT
        self._create: Script = self._client.register_script(_CREATE)
        self._save: Script = self._client.register_script(_SAVE)
        self._list: Script = self._client.register_script(_LIST)

    def _task(self, task_id: str) -> str:
        return f"{self._ns}task:{task_id}"

    def _owner_sets(self, owner: str | None) -> list[str]:
        """The owner's expiry and order sets, named by its key as JSON (None has its own)."""
        named = json.dumps(owner)
        return [f"{self._ns}tasks:owner:{named}", f"{self._ns}tasks:order:{named}"]

    def create_task(self, record: TaskRecord, *, cap: int, owner_cap: int) -> Creation:
        """See `TaskStore.create_task`. One script: prune the sets, count, then write the record,
        its expiry and its place in the three sets."""
        expiry = "" if record.ttl_ms is None else str(math.ceil(record.created_at * 1000 + record.ttl_ms))
        with self._redis.reaching():
            created = self._create(
                keys=[self._task(record.task_id), self._expiry, *self._owner_sets(record.owner), f"{self._ns}tasks:seq"],
                args=[record.task_id, json.dumps(record.to_json()), expiry, cap, owner_cap],
            )
        return {1: Creation.CREATED, 2: Creation.CALLER_FULL}.get(int(created), Creation.FULL)

    def load_task(self, task_id: str) -> TaskRecord | None:
        """See `TaskStore.load_task`. A GET: an expired record is gone with its key."""
        with self._redis.reaching():
            raw = self._client.get(self._task(task_id))
        return None if raw is None else _record(raw)

    def save_task(self, record: TaskRecord) -> TaskRecord:
        """See `TaskStore.save_task`. One script: the stored record's status checked and the new one
        written (with the stored expiry) in one step, so a cancel on another replica is never
        overwritten by this one's late progress or result."""
        with self._redis.reaching():
            kept = self._save(keys=[self._task(record.task_id)], args=[json.dumps(record.to_json()), *sorted(TERMINAL)])
        if isinstance(kept, bytes):
            return _record(kept) or record
        return record

    def list_tasks(self, owner: str | None, after: str | None, limit: int) -> tuple[list[TaskRecord], str | None]:
        """See `TaskStore.list_tasks`. One script: prune the owner's sets, find the cursor's rank in
        creation order, read up to `limit` + 1 live records after it (the one more says whether a
        next page exists)."""
        if after == "":
            raise LookupError(after)  # no task has an empty id (and the script reads '' as no cursor)
        with self._redis.reaching():
            found = self._list(keys=[*self._owner_sets(owner), self._expiry], args=[self._ns, after or "", max(0, limit) + 1])
        if found is None:
            raise LookupError(after)
        records = [record for record in map(_record, found) if record is not None]
        page = records[: max(0, limit)]
        return page, (page[-1].task_id if len(found) > limit and page else None)

    def close(self) -> None:
        """Disconnect every pooled connection; idempotent. Later calls raise `StoreUnavailable`
        rather than quietly opening new connections the owner believes released."""
        self._redis.close()

    def __enter__(self) -> RedisTaskStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
