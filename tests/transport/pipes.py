"""An in-process client for a `Server` over real pipes (the stdio transport, minus the process).

`PipeClient(server)` starts the server's stdio transport on two `os.pipe()`s and reads its output on
a thread of its own; every wait is bounded by `tests._timeouts`.
"""

from __future__ import annotations

import json
import os
import queue
import threading
from typing import Any

from mcpsync import Server

from .._timeouts import LONG, SHORT

MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}
SUB_KEY = "io.modelcontextprotocol/subscriptionId"


def modern(params: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"_meta": dict(MODERN_META), **(params or {})}


class PipeClient:
    def __init__(self, server: Server) -> None:
        self._to_server_r, self._to_server_w = os.pipe()
        self._from_server_r, self._from_server_w = os.pipe()
        self.transport = server.serve_fds(self._to_server_r, self._from_server_w)
        self._frames: queue.Queue[Any] = queue.Queue()
        self._reader = threading.Thread(target=self._read, name="test-pipe-reader")
        self._reader.start()
        self._input_open = True
        self._finished = False

    def _read(self) -> None:
        with os.fdopen(self._from_server_r, "rb") as stream:
            for line in stream:
                self._frames.put(json.loads(line))
        self._frames.put(EOFError())

    def send(self, message: dict[str, Any] | bytes) -> None:
        data = message if isinstance(message, bytes) else json.dumps(message).encode() + b"\n"
        os.write(self._to_server_w, data)

    def request_nowait(self, method: str, params: dict[str, Any] | None = None, id: Any = 1) -> None:
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": id, "method": method}
        if params is not None:
            message["params"] = params
        self.send(message)

    def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        self.send(message)

    def recv(self, timeout: float = LONG) -> dict[str, Any]:
        try:
            frame = self._frames.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"no frame from the server within {timeout} s") from None
        if isinstance(frame, EOFError):
            raise AssertionError("the server closed its output")
        return frame

    def expect_silence(self, timeout: float = SHORT) -> None:
        try:
            frame = self._frames.get(timeout=timeout)
        except queue.Empty:
            return
        raise AssertionError(f"unexpected frame: {frame}")

    def request(self, method: str, params: dict[str, Any] | None = None, id: Any = 1) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """Send a request; return its response and the frames that arrived before it."""
        self.request_nowait(method, params, id)
        before = []
        while True:
            frame = self.recv()
            if "method" not in frame and frame.get("id") == id and type(frame.get("id")) is type(id):
                return frame, before
            before.append(frame)

    def initialize(self, version: str = "2025-11-25") -> dict[str, Any]:
        response, _ = self.request(
            "initialize", {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}, id="init"
        )
        return response

    def listen(self, id: Any, notifications: dict[str, Any]) -> dict[str, Any]:
        """Open a subscription and return its acknowledgement."""
        self.request_nowait("subscriptions/listen", modern({"notifications": notifications}), id=id)
        return self.recv()

    def close_input(self) -> None:
        if self._input_open:
            self._input_open = False
            os.close(self._to_server_w)

    def finish(self, graceful: bool = False) -> list[dict[str, Any]]:
        """Stop the server (end of input, or a graceful shutdown) and return everything it wrote
        that the test had not read yet. Idempotent."""
        if self._finished:
            return []
        self._finished = True
        if graceful:
            assert self.transport.shutdown(LONG), "the transport did not shut down in time"
        self.close_input()
        assert self.transport.wait(LONG), "the transport did not stop"
        os.close(self._from_server_w)
        frames = []
        while True:
            frame = self._frames.get(timeout=LONG)
            if isinstance(frame, EOFError):
                break
            frames.append(frame)
        self._reader.join(LONG)
        os.close(self._to_server_r)
        return frames

    def stop(self) -> list[dict[str, Any]]:
        """Graceful shutdown; returns what the server wrote while stopping."""
        return self.finish(graceful=True)

    def __enter__(self) -> "PipeClient":
        return self

    def __exit__(self, *exc: object) -> None:
        self.finish()
