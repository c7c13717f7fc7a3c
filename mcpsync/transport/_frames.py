"""Splitting a byte stream into newline-delimited frames, with a size limit.

Strategy: sans-I/O. `feed()` takes whatever `os.read` returned and gives back complete lines (without
`\\n` or a trailing `\\r`) and `TOO_LARGE` markers. A line that grows past the limit is reported once
and then discarded as it streams in, up to its newline: it is never buffered whole.
"""

from __future__ import annotations

from typing import Union

TOO_LARGE = object()
"""Marker for a frame longer than the limit (its bytes were dropped)."""

Frame = Union[bytes, object]


class FrameSplitter:
    def __init__(self, max_frame_bytes: int) -> None:
        if max_frame_bytes < 1:
            raise ValueError("max_frame_bytes must be positive")
        self._limit = max_frame_bytes
        self._partial = bytearray()
        self._discarding = False

    def feed(self, data: bytes) -> list[Frame]:
        frames: list[Frame] = []
        start = 0
        find = data.find
        while True:
            newline = find(b"\n", start)
            if newline < 0:
                break
            if self._discarding:
                self._discarding = False
            else:
                if self._partial:
                    self._partial += data[start:newline]
                    line = bytes(self._partial)
                    self._partial.clear()
                else:
                    line = data[start:newline]
                self._emit(line, frames)
            start = newline + 1
        if start < len(data) and not self._discarding:
            if len(self._partial) + len(data) - start > self._limit:
                self._partial.clear()
                self._discarding = True
                frames.append(TOO_LARGE)
            else:
                self._partial += data[start:]
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
        if line.endswith(b"\r"):
            line = line[:-1]
        if len(line) > self._limit:
            frames.append(TOO_LARGE)
        elif line and not line.isspace():
            frames.append(line)
