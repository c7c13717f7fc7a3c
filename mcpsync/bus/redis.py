"""The Redis bus: Redis pub/sub between the processes serving one MCP server.

Strategy: one background thread, `mcpsync-bus-redis`, owned by the `RedisBus` (`close()` stops and
joins it), does all the I/O on two connections: one that publishes and one that is subscribed. The
callers' threads never touch a Redis connection: `publish` appends to a bounded queue and
`subscribe` records the handler, and the thread sends what is queued (a pipeline for a batch),
issues the SUBSCRIBEs and reads messages.

Sleeping. When there is nothing to send or read, the thread blocks in a selector on two sockets:
the pub/sub connection's and the read end of a wake-up socket pair. A message from Redis wakes it
through the first; `publish`, a new `subscribe` and `close()` write one byte to the second (only
when the thread has not yet been woken since it last took the queue, so a burst of publishes costs
one byte). So a publish is sent at once, a message is handled as soon as it arrives, and an idle bus
does not wake at all, except for redis-py's health check (below). Why not the alternatives: redis-py
cannot interrupt a blocking pub/sub read from another thread, so reading in short slices (what this
module did before) delays every publish by up to a slice and wakes the thread 50 times a second;
a second thread that publishes would need its own wake-up and its own shutdown, for the same result.

Two things make "select, then read" correct with redis-py (checked against redis-py 8.1's source):
- Its parser reads the socket in 64 KiB chunks into its own buffer, so after one message is read
  others may already be buffered and the socket will not be readable again for them. Before
  sleeping, the thread therefore reads while `connection.can_read(timeout=0)` (true when the buffer
  holds bytes or the socket has some; for TLS it also pulls what the SSL layer holds) and only then
  selects. Each read allows `socket_timeout` for the rest of a message that is partly there: a read
  with no timeout would fail on half a message, and redis-py turns any read failure into a
  disconnect and a silent reconnect, i.e. lost messages.
- redis-py exposes no public way to get a connection's socket; the selector uses the connection's
  `_sock` attribute (present in every redis-py from 5 on), checked to be a socket, and any change of
  it (redis-py reconnecting behind our back) is treated as an outage, so nothing is missed silently.

Health check: while idle, the thread wakes when redis-py's health check on the pub/sub connection is
due (every `HEALTH_CHECK_INTERVAL` seconds of silence), sends the PING and expects the answer within
`socket_timeout`: a Redis that stopped answering without closing the connection (a frozen process, a
network partition) is seen as an outage within interval + timeout, not at the next publish.

Channels are prefixed with a namespace (`"mcpsync:"` by default, so one Redis can serve several
deployments), and each payload is framed with this bus's random instance id: the thread drops its
own messages on receipt, so a publisher is never handed back what it published (no echo).

Outages. Any Redis error or timeout (every socket operation has `socket_timeout`) ends the
connection: the bus is down, publishes are dropped and counted (`dropped`; logged once per
outage), and the thread reconnects with exponential backoff (0.1 s doubling to 5 s, interrupted at
once by `close()`). redis-py's own retries are off, so an outage is seen at once rather than hidden
by silent retries. A reconnect makes fresh connections and re-subscribes every channel; once Redis
has confirmed every subscription the bus is up and the `on_reconnect` callbacks run, because
messages published meanwhile are gone (level triggers: the owner re-syncs). They run after every
connect that followed a failure: a lost connection, or a first attempt that failed.

The thread is a daemon, so a bus never closed cannot hold the interpreter at exit; `close()` joins
it within its timeout. Payloads are never logged, nor the URL (it may hold a password): only
host:port/db.

The stores beside the bus (`RedisStore`, `RedisTaskStore`) make their client with the same settings
(`redis_client`) and call Redis through a `StoreClient`, which says once how their calls fail.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import os
import selectors
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from .store import StoreUnavailable

if TYPE_CHECKING:
    from redis import Redis
    from redis.client import PubSub

    from . import Handler

__all__ = ["RedisBus", "StoreClient"]

log = logging.getLogger("mcpsync")

THREAD_NAME = "mcpsync-bus-redis"
DEFAULT_NAMESPACE = "mcpsync:"
DEFAULT_SOCKET_TIMEOUT = 2.0
"""Seconds any one Redis operation (connect, send, read) may take before the bus counts Redis as down."""
FIRST_DELAY = 0.1
MAX_DELAY = 5.0
MAX_QUEUED = 10_000
"""Messages waiting for the thread; past it, publishes are dropped and counted."""
BATCH = 512
"""Messages sent in one pipeline, and messages read before the thread looks at the queue again."""
SUBSCRIBE_WAIT = 2.0
"""Seconds `subscribe()` waits for Redis to confirm a new channel while the bus is up."""
HEALTH_CHECK_INTERVAL = 5
"""Seconds of silence after which a connection is checked with a PING (before a publish; and the
idle thread wakes for it on the pub/sub connection)."""
_ID_BYTES = 16
_OWN_CHANNEL = "\x00bus"
"""Always subscribed, never published to: even a bus that only publishes reads its pub/sub
connection, so it sees an outage (and the health checks run) at once rather than at its next publish."""

_CONNECTING, _UP, _DOWN, _CLOSED = "connecting", "up", "down", "closed"


def next_delay(delay: float) -> float:
    """The pause before the next reconnect attempt, after one that followed a pause of `delay`."""
    return min(MAX_DELAY, delay * 2)


def redis_address(url: str) -> str:
    """`host:port/db` of a Redis URL, for logs (no user or password).

    Raises:
        ValueError: not a redis:// or rediss:// URL, a port that is not a number, or a path that is
            not a database number (the message does not repeat the URL).
    """
    parts = urlsplit(url)
    if parts.scheme.lower() not in ("redis", "rediss"):
        raise ValueError("a Redis bus URL starts with redis:// or rediss://")
    try:
        port = parts.port
    except ValueError:
        raise ValueError("the Redis URL's port is not a number between 0 and 65535") from None
    db = parts.path.lstrip("/")
    if db and not db.isdigit():
        raise ValueError("the Redis URL's path is a database number, as in redis://HOST:6379/0")
    return f"{parts.hostname or 'localhost'}:{port or 6379}/{db or 0}"


def redis_client(url: str, socket_timeout: float, what: str) -> tuple[Redis, Any]:
    """A redis-py client as mcpsync's Redis backends use one, and the `redis` module: every
    operation (connect, send, read) within `socket_timeout`, no silent retries (an outage is seen
    at once, not hidden), a PING before a connection idle for `HEALTH_CHECK_INTERVAL` is used.

    Raises:
        ImportError: the `redis` package is not installed; the message names the `what` that
            needs it and the extra that brings it.
    """
    try:
        import redis
        from redis.backoff import NoBackoff
        from redis.retry import Retry
    except ImportError as exc:
        raise ImportError(f"the Redis {what} needs the redis package: pip install 'mcpsync[redis]'") from exc
    client = redis.Redis.from_url(
        url,
        socket_timeout=socket_timeout,
        socket_connect_timeout=socket_timeout,
        retry=Retry(NoBackoff(), 0),
        health_check_interval=HEALTH_CHECK_INTERVAL,
    )
    return client, redis


class StoreClient:
    """A Redis store's client (`RedisStore`, `RedisTaskStore`) and what every call through it
    shares: the errors redis-py raises turned into `StoreUnavailable`, naming host:port/db and
    never the URL, and a close after which no call opens a connection again.

    Why one object: both stores answer an outage the same way, down to the race with `close()`,
    and a fix made in one of them and not the other is a bug found later.
    """

    def __init__(self, url: str, socket_timeout: float, what: str) -> None:
        self.address = redis_address(url)
        self.client, redis = redis_client(url, socket_timeout, what)
        self._what = what
        self._errors: tuple[type[Exception], ...] = (redis.RedisError, OSError)
        self._connection_errors: tuple[type[Exception], ...] = (redis.ConnectionError, redis.TimeoutError, OSError)
        self._closed = False

    @contextlib.contextmanager
    def reaching(self) -> Iterator[None]:
        """Turn what redis-py raises inside into `StoreUnavailable`. A connection error drops the
        pool's idle connections too, which may all be dead (a restarted Redis, a partition)."""
        if self._closed:
            raise StoreUnavailable(f"the {self._what} for Redis at {self.address} is closed")
        try:
            yield
        except self._errors as exc:
            if isinstance(exc, self._connection_errors):
                with contextlib.suppress(*self._errors):
                    self.client.connection_pool.disconnect(inuse_connections=False)
            raise StoreUnavailable(f"Redis at {self.address} did not answer ({type(exc).__name__})") from exc
        except Exception as exc:
            # Closed while the call ran (a metrics reader's PING at shutdown): redis-py's pool
            # disconnects the connection under it, and it fails in its own ways (an AttributeError
            # from a reader whose buffer is gone). The call lost the race with close(), nothing more.
            # While the store is open such an error is a bug, and goes on as itself.
            if self._closed:
                raise StoreUnavailable(f"the {self._what} for Redis at {self.address} is closed") from exc
            raise

    def close(self) -> None:
        """Disconnect every pooled connection; idempotent. Later calls raise `StoreUnavailable`
        rather than quietly opening new connections the owner believes released."""
        if self._closed:
            return
        self._closed = True
        with contextlib.suppress(*self._errors):
            self.client.close()


class RedisBus:
    """A bus over Redis pub/sub; see the module docstring for the threading and the outages.

    Args:
        url: `redis://[[user]:password@]HOST[:PORT][/DB]` or `rediss://...`, with redis-py's URL options.
        namespace: prefixed to every channel name in Redis.
        socket_timeout: seconds any one Redis operation may take.

    Raises:
        ValueError: a malformed URL.
        ImportError: the `redis` package is not installed (`pip install 'mcpsync[redis]'`).
    """

    def __init__(self, url: str, *, namespace: str = DEFAULT_NAMESPACE, socket_timeout: float = DEFAULT_SOCKET_TIMEOUT) -> None:
        if socket_timeout <= 0:
            raise ValueError("socket_timeout must be positive")
        self.address = redis_address(url)
        self._client, redis = redis_client(url, socket_timeout, "bus")
        self._errors: tuple[type[Exception], ...] = (redis.RedisError, OSError)
        self._socket_timeout = socket_timeout
        self._prefix = namespace.encode()
        self._id = os.urandom(_ID_BYTES)
        self._cond = threading.Condition()
        self._handlers: dict[str, list[Handler]] = {}
        self._reconnect_callbacks: list[Callable[[], None]] = []
        self._outbox: collections.deque[tuple[bytes, bytes]] = collections.deque()
        self._to_subscribe: set[str] = set()  # wanted, SUBSCRIBE not yet sent on this connection
        self._subscribed: set[str] = set()  # confirmed by Redis on this connection
        self._state = _CONNECTING
        self._closing = False
        self._dropped = 0
        self._drop_logged = False
        # the thread sleeps on _wake_r; the callers write a byte to _wake_w (once until it has
        # looked at the queue again: _woken) and the thread closes both when it ends (_wake_w None)
        wake_r, wake_w = socket.socketpair()
        wake_r.setblocking(False)
        wake_w.setblocking(False)
        self._wake_r: socket.socket = wake_r
        self._wake_w: socket.socket | None = wake_w
        self._woken = False
        self._wakeups = 0  # times the thread's selector returned; the tests read it (no idle wake-ups)
        self._thread = threading.Thread(target=self._run, name=THREAD_NAME, daemon=True)
        try:
            self._thread.start()
        except BaseException:
            self._client.close()
            wake_r.close()
            wake_w.close()
            raise

    # -- what the callers' threads call ----------------------------------------------------------
    @property
    def connected(self) -> bool:
        """Redis is reachable and every channel is subscribed."""
        return self._state == _UP

    @property
    def dropped(self) -> int:
        """Messages published but never sent: Redis was down, the queue was full, or the bus closed."""
        return self._dropped

    def wait_connected(self, timeout: float) -> bool:
        """Wait up to `timeout` seconds for the bus to be up; whether it is."""
        with self._cond:
            return self._cond.wait_for(lambda: self._state in (_UP, _CLOSED), timeout) and self._state == _UP

    def wait_disconnected(self, timeout: float) -> bool:
        """Wait up to `timeout` seconds for the bus to see Redis down (or to close); whether it has."""
        with self._cond:
            return self._cond.wait_for(lambda: self._state in (_DOWN, _CLOSED), timeout)

    def publish(self, channel: str, payload: bytes) -> None:
        """Queue `payload` for the other buses subscribed to `channel`; never blocks on Redis. While
        Redis is down (or the queue is full, or the bus closed) the message is dropped and counted."""
        key = self._prefix + channel.encode()
        frame = self._id + payload
        with self._cond:
            if not self._closing and self._state != _DOWN and len(self._outbox) < MAX_QUEUED:
                self._outbox.append((key, frame))
                self._wake()
                return
        self._drop(1)

    def subscribe(self, channel: str, handler: Handler) -> None:
        """Call `handler` on the bus's thread for each message another bus publishes on `channel`.

        A channel new to this bus is subscribed in Redis by the thread; while the bus is up, this
        waits (up to `SUBSCRIBE_WAIT`, not when called from the bus's own thread) until Redis has
        confirmed it, so a message published after this returns reaches the handler. While Redis
        is down it returns at once: the reconnect subscribes every channel before `on_reconnect`.
        """
        with self._cond:
            handlers = self._handlers.setdefault(channel, [])
            handlers.append(handler)
            if len(handlers) > 1 or self._closing:
                return
            self._to_subscribe.add(channel)
            self._wake()
            if self._state != _UP or threading.current_thread() is self._thread:
                return
            confirmed = self._cond.wait_for(lambda: channel in self._subscribed or self._state != _UP or self._closing, SUBSCRIBE_WAIT)
        if not confirmed:
            log.warning("bus: Redis at %s has not confirmed the subscription to %r within %.1f s", self.address, channel, SUBSCRIBE_WAIT)

    def on_reconnect(self, callback: Callable[[], None]) -> None:
        """Call `callback()` on the bus's thread each time the bus is up again after a failure."""
        with self._cond:
            self._reconnect_callbacks.append(callback)

    def close(self, timeout: float = 5.0) -> None:
        """Stop the thread (it closes both connections) and join it within `timeout` seconds; what
        was still queued is dropped. Idempotent; from a handler, it stops without joining."""
        deadline = time.monotonic() + timeout
        with self._cond:
            self._closing = True
            self._cond.notify_all()  # a thread pausing before a reconnect waits on the condition
            self._wake()  # one sleeping in its selector, on the socket pair
        if threading.current_thread() is self._thread:
            return
        self._thread.join(max(0.0, deadline - time.monotonic()))
        if self._thread.is_alive():
            log.warning("bus: the %s thread did not stop within %.1f s", THREAD_NAME, timeout)

    def __enter__(self) -> RedisBus:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _wake(self) -> None:
        """Wake the thread from its selector, if it may be asleep there; called holding `_cond`."""
        if self._woken or self._wake_w is None:
            return
        self._woken = True
        try:
            self._wake_w.send(b"\0")
        except OSError:  # cannot be full (one byte per wake-up); never fail a publish for it
            pass

    def _drop(self, count: int) -> None:
        with self._cond:
            self._dropped += count
            first = not self._drop_logged and not self._closing
            self._drop_logged = True
        if first:
            log.warning("bus: Redis at %s is unreachable (or the queue is full): published messages are dropped until it is back", self.address)

    # -- the thread ------------------------------------------------------------------------------
    def _run(self) -> None:
        delay = FIRST_DELAY
        missed = False  # messages may have been lost: on_reconnect is due at the next connect
        try:
            while not self._closing:
                pubsub: PubSub | None = None
                try:
                    pubsub = self._client.pubsub()  # type: ignore[no-untyped-call]  # redis-py leaves it unannotated
                    self._connect(pubsub)
                    delay = FIRST_DELAY
                    if missed:
                        missed = False
                        self._fire_reconnect()
                    self._serve(pubsub)
                except self._errors as exc:
                    if self._closing:
                        break
                    self._went_down(exc)
                    self._quietly(self._client.connection_pool.disconnect)
                    missed = True
                    with self._cond:
                        if self._cond.wait_for(lambda: self._closing, delay):
                            break
                    delay = next_delay(delay)
                finally:
                    if pubsub is not None:
                        self._quietly(pubsub.close)
        finally:
            self._quietly(self._client.close)
            with self._cond:
                self._state = _CLOSED
                self._closing = True  # also when the thread died of a bug: publishes drop, counted
                wake_w, self._wake_w = self._wake_w, None
                if wake_w is not None:
                    wake_w.close()
                self._wake_r.close()
                dropped = len(self._outbox)
                self._outbox.clear()
                self._dropped += dropped
                self._cond.notify_all()

    def _connect(self, pubsub: PubSub) -> None:
        """Reach Redis on both connections and subscribe every channel; then the bus is up."""
        self._client.ping()
        with self._cond:
            channels = {_OWN_CHANNEL, *self._handlers}
            self._to_subscribe.clear()
            self._subscribed.clear()
        pubsub.subscribe(*(self._prefix + channel.encode() for channel in channels))
        deadline = time.monotonic() + self._socket_timeout
        while not channels <= self._subscribed:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError("Redis did not confirm the subscriptions")
            self._handle(pubsub.get_message(timeout=remaining))
        with self._cond:
            was = self._state
            self._state = _UP
            self._drop_logged = False
            dropped = self._dropped
            self._cond.notify_all()
        if was == _DOWN:
            log.info("bus: Redis at %s is back (%d message(s) dropped so far)", self.address, dropped)

    def _serve(self, pubsub: PubSub) -> None:
        """Send what is queued and handle what comes, until `close()`; raises on any Redis error.

        Each turn: take the queue (clearing `_woken`, so a publish after this writes a wake-up),
        send it, read every message already there, then, with nothing left to do, sleep in the
        selector until Redis sends something, a caller writes a wake-up, or the health check is due.
        """
        connection = pubsub.connection
        sock = self._socket_of(connection)
        pinged_at: float | None = None
        with selectors.DefaultSelector() as selector:
            selector.register(self._wake_r, selectors.EVENT_READ)
            selector.register(sock, selectors.EVENT_READ)
            while True:
                with self._cond:
                    if self._closing:
                        return
                    channels = list(self._to_subscribe)
                    self._to_subscribe.clear()
                    batch = [self._outbox.popleft() for _ in range(min(BATCH, len(self._outbox)))]
                    more = bool(self._outbox)
                    self._woken = False
                if channels:
                    pubsub.subscribe(*(self._prefix + channel.encode() for channel in channels))
                if batch:
                    self._send(batch)
                if self._read(pubsub, sock) or more:
                    continue  # more to send or to read, or closing: look at the queue again first
                timeout, pinged_at = self._health_check(pubsub, pinged_at)
                ready = selector.select(timeout)
                self._wakeups += 1
                if any(key.fileobj is self._wake_r for key, _ in ready):
                    self._drain_wake()

    def _read(self, pubsub: PubSub, sock: socket.socket) -> bool:
        """Handle the messages Redis has sent, buffered by redis-py or waiting on the socket, up to
        `BATCH`; whether it stopped early (at `BATCH`, or at a `close()`): look at the queue again.
        Selecting is safe once this returns False: nothing is left that the socket would not signal."""
        connection = pubsub.connection
        for _ in range(BATCH):
            if self._closing:  # close() from a handler: no handler runs after it
                return True
            if connection is None or self._socket_of(connection) is not sock:
                raise ConnectionError("the pub/sub connection was closed or replaced")
            if not connection.can_read(timeout=0):
                return False
            # something is there, maybe half a message: allow socket_timeout for the rest (a read
            # without one would fail, and redis-py would then reconnect, dropping messages)
            self._handle(pubsub.get_message(timeout=self._socket_timeout))
        return True

    def _health_check(self, pubsub: PubSub, pinged_at: float | None) -> tuple[float | None, float | None]:
        """How long the idle thread may sleep, and when the unanswered health-check PING went out.

        redis-py moves `next_health_check` on at every reply read; once it is past, the PING is
        sent (`check_health`), and a reply of any kind within `socket_timeout` moves it on again.
        No reply by then: Redis has stopped answering and the bus is down.
        """
        connection = pubsub.connection
        if connection is None:
            raise ConnectionError("the pub/sub connection was closed")
        if not connection.health_check_interval:
            return None, None  # turned off (a URL option): sleep until something happens
        now = time.monotonic()
        due = float(connection.next_health_check)
        if now < due:
            return due - now, None
        if pinged_at is None:
            pubsub.check_health()
            return self._socket_timeout, now
        if now - pinged_at >= self._socket_timeout:
            raise TimeoutError("Redis did not answer the health check")
        return pinged_at + self._socket_timeout - now, pinged_at

    @staticmethod
    def _socket_of(connection: Any) -> socket.socket:
        # redis-py keeps the socket in a private attribute (there is no public accessor); see the
        # module docstring. None: the connection was closed.
        sock = getattr(connection, "_sock", None)
        if not isinstance(sock, socket.socket):
            raise ConnectionError("the pub/sub connection has no socket")
        return sock

    def _drain_wake(self) -> None:
        try:
            while self._wake_r.recv(4096):
                pass
        except BlockingIOError:
            pass

    def _send(self, batch: list[tuple[bytes, bytes]]) -> None:
        try:
            if len(batch) == 1:
                self._client.publish(*batch[0])
                return
            pipeline = self._client.pipeline(transaction=False)
            for key, frame in batch:
                pipeline.publish(key, frame)
            pipeline.execute()
        except self._errors:
            self._drop(len(batch))
            raise

    def _handle(self, message: dict[str, Any] | None) -> None:
        if message is None:
            return
        kind, key, data = message.get("type"), message.get("channel"), message.get("data")
        if not isinstance(key, bytes) or not key.startswith(self._prefix):
            return
        channel = key[len(self._prefix):].decode("utf-8", "replace")
        if kind == "subscribe":
            with self._cond:
                self._subscribed.add(channel)
                self._cond.notify_all()
            return
        if kind != "message" or not isinstance(data, bytes) or len(data) < _ID_BYTES or data[:_ID_BYTES] == self._id:
            return  # not a message, not framed by a bus, or our own (no echo)
        with self._cond:
            handlers = list(self._handlers.get(channel, ()))
        payload = data[_ID_BYTES:]
        for handler in handlers:
            try:
                handler(channel, payload)
            except Exception:
                log.exception("bus: a handler for channel %r failed", channel)

    def _fire_reconnect(self) -> None:
        with self._cond:
            callbacks = list(self._reconnect_callbacks)
        for callback in callbacks:
            try:
                callback()
            except Exception:
                log.exception("bus: an on_reconnect callback failed")

    def _went_down(self, exc: Exception) -> None:
        with self._cond:
            was = self._state
            self._state = _DOWN
            self._subscribed.clear()
            self._to_subscribe.clear()
            dropped = len(self._outbox)
            self._outbox.clear()
            self._cond.notify_all()
        if dropped:
            self._drop(dropped)
        if was == _UP:
            log.warning("bus: lost Redis at %s (%s); reconnecting with backoff", self.address, type(exc).__name__)
        elif was == _CONNECTING:
            log.warning("bus: cannot reach Redis at %s (%s); retrying with backoff", self.address, type(exc).__name__)

    def _quietly(self, close: Callable[[], None]) -> None:
        try:
            close()
        except self._errors:
            pass
