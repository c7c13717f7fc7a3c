"""Tests for mcpsync.protocol.framing: splitting a byte stream into size-limited lines.

The splitter is sans-I/O, so these tests feed it chunks directly. Two properties matter most:
a frame over the limit is reported once and its bytes are dropped as they stream in (the buffer
never grows past the limit), and the frames found do not depend on how the stream was chunked.
"""

from __future__ import annotations

import pytest

from mcpsync.protocol.framing import TOO_LARGE, FrameSplitter

pytestmark = pytest.mark.timeout(30)

KiB = 1024
MiB = 1024 * KiB


class _MeteredBuffer(bytearray):
    """A bytearray that remembers the largest size it ever reached."""

    peak = 0

    def __iadd__(self, other):  # type: ignore[override]
        result = super().__iadd__(other)
        self.peak = max(self.peak, len(self))
        return result

    def extend(self, other) -> None:  # type: ignore[override]
        super().extend(other)
        self.peak = max(self.peak, len(self))

    def append(self, item) -> None:  # type: ignore[override]
        super().append(item)
        self.peak = max(self.peak, len(self))


def metered(limit: int) -> tuple[FrameSplitter, _MeteredBuffer]:
    splitter = FrameSplitter(limit)
    buffer = _MeteredBuffer()
    splitter._partial = buffer  # white-box: watch the one buffer the splitter keeps
    return splitter, buffer


def split(chunks: list[bytes], limit: int = 64) -> list[object]:
    splitter = FrameSplitter(limit)
    frames: list[object] = []
    for chunk in chunks:
        frames.extend(splitter.feed(chunk))
    frames.extend(splitter.finish())
    return frames


def bytewise(data: bytes) -> list[bytes]:
    return [data[i : i + 1] for i in range(len(data))]


# -- lines ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize(
    "stream, frames",
    [
        pytest.param(b'{"a":1}\n', [b'{"a":1}'], id="one-line"),
        pytest.param(b"a\nb\nc\n", [b"a", b"b", b"c"], id="several"),
        pytest.param(b"a\r\nb\r\n", [b"a", b"b"], id="crlf"),
        pytest.param(b"a\r\nb\nc\r\n", [b"a", b"b", b"c"], id="mixed-endings"),
        pytest.param(b"\n\n\na\n\n", [b"a"], id="blank-lines"),
        pytest.param(b"\r\n\r\na\r\n", [b"a"], id="blank-crlf-lines"),
        pytest.param(b"   \n\t\na\n \r\n", [b"a"], id="whitespace-only-lines"),
        pytest.param(b"a\nlast", [b"a", b"last"], id="last-line-without-newline"),
        pytest.param(b"a\nlast\r", [b"a", b"last"], id="last-line-cr-without-newline"),
        pytest.param(b"", [], id="empty-stream"),
        pytest.param(b"a\r\r\n", [b"a\r"], id="only-one-cr-stripped"),
        pytest.param(b"a\rb\n", [b"a\rb"], id="inner-cr-kept"),
        pytest.param(b"  {}  \n", [b"  {}  "], id="surrounding-spaces-kept"),
    ],
)
def test_lines(stream: bytes, frames: list[bytes]) -> None:
    assert split([stream]) == frames


@pytest.mark.parametrize(
    "stream",
    [
        b'{"jsonrpc":"2.0","id":1,"method":"ping"}\n{"a":2}\r\n\n{"b":3}',
        b"x" * 64 + b"\n" + b"y" * 65 + b"\nok\n" + b"z" * 200,
        b"\n\r\n" + b"w" * 63 + b"\r\n",
    ],
)
def test_frames_do_not_depend_on_chunking(stream: bytes) -> None:
    whole = split([stream])
    assert split(bytewise(stream)) == whole
    for cut in range(1, len(stream)):
        assert split([stream[:cut], stream[cut:]]) == whole, cut


def test_a_line_split_across_many_chunks_is_joined() -> None:
    splitter = FrameSplitter(1 * MiB)
    assert splitter.feed(b'{"jsonrpc":') == []
    assert splitter.feed(b'"2.0",') == []
    assert splitter.feed(b'"id":1}\n{"next"') == [b'{"jsonrpc":"2.0","id":1}']
    assert splitter.finish() == [b'{"next"']


def test_finish_resets_so_nothing_is_emitted_twice() -> None:
    splitter = FrameSplitter(64)
    splitter.feed(b"tail")
    assert splitter.finish() == [b"tail"]
    assert splitter.finish() == []


def test_feed_returns_frames_in_order() -> None:
    splitter = FrameSplitter(8)
    assert splitter.feed(b"1\n" + b"x" * 9 + b"\n2\n") == [b"1", TOO_LARGE, b"2"]


@pytest.mark.parametrize("limit", [0, -1])
def test_the_limit_must_be_positive(limit: int) -> None:
    with pytest.raises(ValueError):
        FrameSplitter(limit)


# -- the limit ---------------------------------------------------------------------------------------------

def test_a_line_of_exactly_the_limit_is_a_frame() -> None:
    assert split([b"x" * 64 + b"\n"], limit=64) == [b"x" * 64]
    assert split(bytewise(b"x" * 64 + b"\n"), limit=64) == [b"x" * 64]
    assert split([b"x" * 64], limit=64) == [b"x" * 64]  # at end of input too


def test_a_line_one_byte_over_the_limit_is_too_large() -> None:
    assert split([b"x" * 65 + b"\n"], limit=64) == [TOO_LARGE]
    assert split(bytewise(b"x" * 65 + b"\n"), limit=64) == [TOO_LARGE]


def test_too_large_is_reported_once_and_serving_goes_on() -> None:
    assert split([b"a\n" + b"x" * 1000 + b"\nb\n"], limit=64) == [b"a", TOO_LARGE, b"b"]
    assert split(bytewise(b"a\n" + b"x" * 1000 + b"\nb\n"), limit=64) == [b"a", TOO_LARGE, b"b"]


def test_two_oversized_lines_in_a_row_are_two_reports() -> None:
    stream = b"x" * 100 + b"\n" + b"y" * 100 + b"\nok\n"
    assert split([stream], limit=64) == [TOO_LARGE, TOO_LARGE, b"ok"]
    assert split(bytewise(stream), limit=64) == [TOO_LARGE, TOO_LARGE, b"ok"]


def test_an_oversized_last_line_without_newline_is_reported_and_dropped() -> None:
    splitter = FrameSplitter(64)
    assert splitter.feed(b"ok\n" + b"x" * 100) == [b"ok", TOO_LARGE]
    assert splitter.finish() == []


def test_the_discarded_line_ends_at_its_newline_and_the_next_starts_clean() -> None:
    splitter = FrameSplitter(16)
    assert splitter.feed(b"x" * 20) == [TOO_LARGE]
    assert splitter.feed(b"x" * 20) == []  # still the same line: no second report
    assert splitter.feed(b'xx\n{"id":1}') == []
    assert splitter.finish() == [b'{"id":1}']


def test_an_oversized_line_is_discarded_without_buffering_it() -> None:
    """10 chunks of 1 MiB with a 64 KiB limit: the buffer never holds more than the limit."""
    limit = 64 * KiB
    splitter, buffer = metered(limit)
    frames: list[object] = []
    for _ in range(10):
        frames.extend(splitter.feed(b"y" * MiB))
        assert len(buffer) <= limit
    frames.extend(splitter.feed(b"tail\n" + b'{"jsonrpc":"2.0","id":1,"method":"ping"}\n'))
    frames.extend(splitter.finish())
    assert frames == [TOO_LARGE, b'{"jsonrpc":"2.0","id":1,"method":"ping"}']
    assert buffer.peak <= limit


def test_many_oversized_lines_keep_the_buffer_bounded() -> None:
    limit = 64 * KiB
    splitter, buffer = metered(limit)
    frames: list[object] = []
    chunk = (b"z" * (100 * KiB) + b"\n") * 10  # ten oversized lines in a 1 MiB chunk
    for _ in range(10):
        frames.extend(splitter.feed(chunk))
    assert frames == [TOO_LARGE] * 100
    assert buffer.peak <= limit


def test_an_oversized_line_ending_in_the_same_chunk_is_not_buffered() -> None:
    limit = 64 * KiB
    splitter, buffer = metered(limit)
    frames = splitter.feed(b"z" * (60 * KiB))  # a partial line, under the limit
    frames += splitter.feed(b"z" * MiB + b"\n{}\n")  # it goes on for 1 MiB and ends in this chunk
    assert frames == [TOO_LARGE, b"{}"]
    assert buffer.peak <= limit


@pytest.mark.parametrize("body, frames", [
    pytest.param(b"x" * 63, [b"x" * 63], id="limit-minus-one-plus-cr"),
    pytest.param(b"x" * 64, [TOO_LARGE], id="limit-plus-cr"),  # the CR counts: every byte before the LF does
])
def test_the_limit_counts_a_trailing_cr_however_the_stream_is_chunked(body: bytes, frames: list[object]) -> None:
    line = body + b"\r\n"
    assert split([line], limit=64) == frames
    assert split([line[:-1], line[-1:]], limit=64) == frames
    assert split([line[:-2], line[-2:]], limit=64) == frames
    assert split(bytewise(line), limit=64) == frames
