"""A TCP relay to a redis-server that a test partitions from it and heals: the store of one process
going away while every other keeps it (tests/bus/test_store.py's pooled connections, the
readiness rotation behind nginx in integration/test_readiness_rotation.py)."""

from __future__ import annotations

import selectors
import socket
import threading

from .._timeouts import LONG


class SilentProxy:
    """A TCP relay to a redis-server that can go silent as a network partition does: after `cut()`
    nothing is relayed and nothing is closed (no FIN, no RST: a client sees only its reads time out);
    after `heal()` connections made from then on relay again, while those made before stay silent,
    as connections across a partition stay dead. One thread, a selector, a socketpair to stop it."""

    def __init__(self, upstream_port: int) -> None:
        self._upstream_port = upstream_port
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._lock = threading.Lock()
        self._generation = 0  # connections of an older generation never relay again
        self._silent = False
        self._closing = False
        self._wake_r, self._wake_w = socket.socketpair()
        self._peers: dict[socket.socket, tuple[socket.socket, int]] = {}
        self._thread = threading.Thread(target=self._run, name="store-test-silent-proxy")
        self._thread.start()

    def cut(self) -> None:
        with self._lock:
            self._silent = True
            self._generation += 1

    def heal(self) -> None:
        with self._lock:
            self._silent = False

    def close(self) -> None:
        with self._lock:
            self._closing = True
        self._wake_w.send(b"x")
        self._thread.join(LONG)
        for sock in (self._listener, self._wake_r, self._wake_w, *self._peers):
            sock.close()

    def __enter__(self) -> SilentProxy:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _run(self) -> None:
        with selectors.DefaultSelector() as selector:
            selector.register(self._listener, selectors.EVENT_READ)
            selector.register(self._wake_r, selectors.EVENT_READ)
            while True:
                for key, _ in selector.select():
                    with self._lock:
                        if self._closing:
                            return
                        silent, generation = self._silent, self._generation
                    sock = key.fileobj
                    assert isinstance(sock, socket.socket)
                    if sock is self._listener:
                        client, _ = self._listener.accept()
                        upstream = socket.create_connection(("127.0.0.1", self._upstream_port), timeout=LONG)
                        born = -1 if silent else generation
                        self._peers[client], self._peers[upstream] = (upstream, born), (client, born)
                        selector.register(client, selectors.EVENT_READ)
                        selector.register(upstream, selectors.EVENT_READ)
                        continue
                    data = sock.recv(65536)
                    other, born = self._peers[sock]
                    if not data:  # one side closed: close both (only a live relay gets here in the tests)
                        for end in (sock, other):
                            selector.unregister(end)
                            del self._peers[end]
                            end.close()
                    elif not silent and born == generation:
                        other.sendall(data)
