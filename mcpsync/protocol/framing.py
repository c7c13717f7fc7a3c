"""Splitting a byte stream into newline-delimited frames, with a size limit.

Strategy: sans-I/O. `feed()` takes whatever `os.read` returned and gives back complete lines (without
`\\n` or a trailing `\\r`) and `TOO_LARGE` markers. The limit counts every byte before the `\\n`
(a CR included), however the stream is chunked. A line past the limit is reported once and its bytes
are dropped as they arrive, up to its newline: it is never buffered, not even in part beyond the limit.
It lives in `protocol/` because both ends read newline-delimited frames: the server's stdio
transport and the client's stdio connection (neither may import the other's private modules).
"""

from __future__ import annotations

import enum


class _Marker(enum.Enum):
    TOO_LARGE = "too large"


TOO_LARGE = _Marker.TOO_LARGE
"""Marker for a frame longer than the limit (its bytes were dropped); an enum member, so
`frame is TOO_LARGE` tells a checker that any other frame is bytes."""

Frame = bytes | _Marker

DEFAULT_MAX_FRAME_BYTES = 16 * 1024 * 1024
"""The largest message mcpsync takes by default: a stdio line, and over HTTP a request body (one
limit for one message, whichever transport carries it)."""


class FrameSplitter:
    def __init__(self, max_frame_bytes: int) -> None:
        if max_frame_bytes < 1:
            raise ValueError("max_frame_bytes must be positive")
        self._limit = max_frame_bytes
        self._partial = bytearray()
        self._discarding = False

    def feed(self, data: bytes) -> list[Frame]:
        end = len(data) - 1
        if end >= 0 and data.find(b"\n") == end and end <= self._limit and not self._partial and not self._discarding:
            line = data[:-2] if data.endswith(b"\r\n") else data[:-1]  # the usual read: one whole line
            return [line] if line and not line.isspace() else []
        if data[-1:] == b"\n" and not self._partial and not self._discarding and len(data) <= self._limit:
            return self._whole_lines(data)
        frames: list[Frame] = []
        start = 0
        find = data.find
        while True:
            newline = find(b"\n", start)
            if newline < 0:
                break
            if self._discarding:
                self._discarding = False
            elif len(self._partial) + newline - start > self._limit:
                self._partial.clear()
                frames.append(TOO_LARGE)
            elif self._partial:
                self._partial += data[start:newline]
                self._emit(bytes(self._partial), frames)
                self._partial.clear()
            else:
                self._emit(data[start:newline], frames)
            start = newline + 1
        if start < len(data) and not self._discarding:
            if len(self._partial) + len(data) - start > self._limit:
                self._partial.clear()
                self._discarding = True
                frames.append(TOO_LARGE)
            else:
                self._partial += data[start:]
        return frames

    def _whole_lines(self, data: bytes) -> list[Frame]:
        """Whole lines, nothing held over, none near the limit: one split."""
        frames: list[Frame] = []
        for line in data.split(b"\n")[:-1]:
            self._emit(line, frames)
        return frames

    def finish(self) -> list[Frame]:
        """End of stream: a last line without a newline still counts."""
        frames: list[Frame] = []
        if self._partial and not self._discarding:
            self._emit(bytes(self._partial), frames)
        self._partial.clear()
        self._discarding = False
        return frames

    def _emit(self, line: bytes, frames: list[Frame]) -> None:
        """A complete line within the limit: blank ones are skipped, a trailing CR dropped."""
        if line.endswith(b"\r"):
            line = line[:-1]
        if line and not line.isspace():
            frames.append(line)
