"""Requests out of a connection's bytes: httptools (llhttp, Node.js's parser) parses, and mcpsync
adds the refusals a server behind a proxy needs.

Why httptools: it is strict where desync starts (it refuses bare CR and LF, control characters
in values, obs-fold, a space before the colon, padded or duplicate `Content-Length`, CL with TE,
bad chunk sizes) and it costs about 1.4 µs per MCP POST, where h11, as strict, costs about 45 µs
(parse and frame; measured side by side on the same request, `scripts/bench-http-parsers`).
Every MCP request is one small POST, so that difference is the server's CPU budget per request.

Strategy: the connection feeds whatever `recv` returned (`feed`); the parser's callbacks collect
each request, and a complete one (head and whole body) is queued on `ready`. Bodies are read
whole before the application runs, so the application never waits for a slow client, and a
worker thread is never held by one. So that reading a body is spent only on a request the
application will serve, the head goes to the connection's `on_head` as soon as it is whole,
inside llhttp's callback: before any byte after it is parsed (or `100 Continue` sent); its
`Refusal` (the application's own answer: no token, say) stops the parser there. A head that
passes takes its body's share of the server's `BodyBudget` (all of a `Content-Length` at once,
a chunked body as it comes; 503 with `Retry-After` when it does not fit), which the request
holds until the connection `settle`s it. While a head or a chunked body is being read, bytes go to
the parser in slices of `_SLICE`: after each slice the sizes are known to within a slice, so the
head's size and the chunked framing's overhead (sizes, extensions, trailers: httptools does not
report extensions) are bounded without our own parsing.

What mcpsync refuses on top of llhttp (`Refusal`: the connection answers its status and closes):
a head over `MAX_HEAD_BYTES` or `MAX_HEADERS` (431), duplicate or missing Host on HTTP/1.1, a
control character left in a value, chunked on HTTP/1.0, a transfer coding other than chunked
(501), a version other than 1.0 and 1.1 (505), a body over `max_body` (413), more than
`CHUNK_FRAMING` bytes of chunked framing per chunk (sizes, extensions) beyond the trailers'
`MAX_TRAILER_BYTES`, an absolute-form target that does not parse, CONNECT, a body the server's
budget cannot hold (503). After an `Upgrade`
request the connection serves it and closes: mcpsync upgrades to nothing. Where llhttp is stricter
than RFC 9112 requires (whitespace before a chunk extension, a duplicate but equal Content-Length,
`chunked, gzip` is a 400 rather than a 501) its refusal stands; where it reads within the RFC's
leniency (several spaces between the request line's parts) its reading stands.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote_to_bytes, urlsplit

import httptools
from httptools import HttpParserError, HttpParserInvalidMethodError, HttpParserInvalidURLError, HttpParserUpgrade

from ..errors import McpsyncError
from ._budget import RETRY_AFTER, BodyBudget

MAX_HEAD_BYTES = 64 * 1024
MAX_HEADERS = 100
CHUNK_FRAMING = 1024
"""Bytes of chunked framing (size line, extensions, CRLFs) allowed per chunk on average."""
MAX_TRAILER_BYTES = 16 * 1024
"""Bytes of trailer fields after a chunked body (dropped, but read)."""
_SLICE = 4096
_CTL = bytes([*range(0x00, 0x09), *range(0x0A, 0x20), 0x7F])
"""The control characters a field value may not hold (HTAB it may); deleted with `bytes.translate`,
which does in a few instructions a byte what a regular expression's character class does in forty."""
_FRAMING_SIZES = frozenset(len(name) for name in ("host", "content-length", "transfer-encoding", "expect"))
"""The lengths of the names of the fields whose meaning `on_headers_complete` checks (host,
content-length, transfer-encoding, expect): a name of another length is none of them."""
_IDLE, _HEAD, _BODY = 0, 1, 2


class Refusal(McpsyncError):
    """The request cannot be served: answer `status` (with `why` and any `headers`, or the whole
    `response` when the application wrote it) and close the connection."""

    def __init__(self, status: int, why: str, *, headers: Sequence[tuple[str, str]] = (), response: bytes | None = None) -> None:
        super().__init__(why)
        self.status = status
        self.headers = tuple(headers)
        self.response = response


@dataclass(slots=True)
class RequestHead:
    """A request's head, whole: header names and values are latin-1 text, values trimmed of SP
    and HTAB; `length` is the declared Content-Length (None without one)."""

    method: str
    path: str
    query: str
    version: str
    headers: list[tuple[str, str]]
    length: int | None
    chunked: bool

    @property
    def has_body(self) -> bool:
        return self.chunked or bool(self.length)


@dataclass(slots=True)
class ParsedRequest:
    """One whole request: its head, what `on_head` made of it, its body, and the body budget it
    holds (`reserved` bytes) until `RequestReader.settle`."""

    head: RequestHead
    environ: dict[str, Any]
    body: bytes
    keep_alive: bool
    reserved: int


OnHead = Callable[[RequestHead], dict[str, Any]]
"""Called with each head once it is whole, before its body is read: the request's environ, or
`Refusal` to answer it instead (its body is then never read)."""


class RequestReader:
    """Feeds a connection's bytes to llhttp and queues the complete requests on `ready`."""

    # Slots: more than 30 attributes would make the instance's dict a plain one, and every
    # attribute read on the parser's path (a few dozen a request) a dict look-up.
    __slots__ = (
        "_max_body", "_on_head", "_budget", "_held", "_closed", "_parser", "ready", "wants_continue", "stopped", "refusal",
        "_phase", "_turns", "_piece", "_url", "_path", "_query", "_raw", "_headers", "_body", "_body_size", "_head_bytes",
        "_head_uncounted", "_chunked", "_chunks", "_framing", "_trailers", "_trailer_bytes", "_refusal", "_head", "_environ",
        "_reserved",
    )

    def __init__(self, max_body: int, on_head: OnHead, budget: BodyBudget | None = None) -> None:
        self._max_body = max_body
        self._on_head = on_head
        self._budget = budget
        self._held = 0  # budget taken for the ready requests and the one being read
        self._closed = False
        self._parser = httptools.HttpRequestParser(self)
        self.ready: list[ParsedRequest] = []  # rarely more than one; an empty deque costs 600 bytes a connection
        self.wants_continue = False  # the current request waits for `100 Continue` before its body
        self.stopped = False  # nothing more is parsed: after an Upgrade (or CONNECT), or `refusal`
        self.refusal: Refusal | None = None  # what to answer once the requests before it are served
        self._phase = _IDLE
        self._turns = 0  # phase changes, so a slice wholly inside one phase is known
        self._piece = 0  # the size of the piece being parsed
        self._reset()

    def _reset(self) -> None:
        self._url = b""
        self._path = self._query = ""
        self._raw: list[tuple[bytes, bytes]] = []
        self._headers: list[tuple[str, str]] = []
        self._body: list[bytes] = []
        self._body_size = 0
        self._head_bytes = 0
        self._head_uncounted = False  # the head began inside a piece that also ended a request
        self._chunked = False
        self._chunks = 0
        self._framing = 0
        self._trailers = 0
        self._trailer_bytes = 0
        self._refusal: Refusal | None = None
        self._head: RequestHead | None = None
        self._environ: dict[str, Any] = {}
        self._reserved = 0

    @property
    def in_request(self) -> bool:
        """Some of a request has arrived, not all of it."""
        return self._phase != _IDLE

    @property
    def in_body(self) -> bool:
        return self._phase == _BODY

    @property
    def body_size(self) -> int:
        return self._body_size

    def settle(self, request: ParsedRequest) -> None:
        """`request` has been answered: the budget its body held is given back."""
        if self._closed or not request.reserved:
            return  # close() gave it back already
        self._give(request.reserved)
        request.reserved = 0

    def close(self) -> None:
        """The connection ends: everything its requests held goes back to the budget (once)."""
        if not self._closed:
            self._closed = True
            self._give(self._held)

    def _take(self, size: int) -> None:
        """Hold `size` more body bytes for the current request, or refuse it (503)."""
        if self._budget is None or self._closed:
            return
        if not self._budget.take(size, self._reserved + size):
            self._refuse(503, "the server holds as many request bodies as it may; retry", (("Retry-After", str(RETRY_AFTER)),))
        self._held += size
        self._reserved += size

    def _give(self, size: int) -> None:
        if self._budget is not None and size:
            self._held -= size
            self._budget.give(size)

    def feed(self, data: bytes) -> None:
        """Parse `data`; complete requests go to `ready`. Raises `Refusal` for a request that
        cannot be served (the requests queued before it are still served)."""
        if self.stopped:
            return
        try:
            self._feed_all(data)
        except Refusal as refusal:
            if not self.ready:
                raise
            self.stopped, self.refusal = True, refusal  # the requests before it are served first

    def _feed_all(self, data: bytes) -> None:
        if self._phase == _IDLE and len(data) <= _SLICE:
            self._feed(data, len(data))
            return
        view = memoryview(data)
        offset = 0
        while offset < len(data):
            sliced = self._phase != _BODY or self._chunked  # sizes are counted per slice
            piece = view[offset : offset + _SLICE] if sliced else view[offset:]
            self._feed(piece, len(piece))
            offset += len(piece)
            if self.stopped:
                return

    def _feed(self, piece: bytes | memoryview, size: int) -> None:
        phase, turns, body_before = self._phase, self._turns, self._body_size
        self._piece = size
        try:
            self._parser.feed_data(piece)
        except HttpParserUpgrade:
            self.stopped = True
            if self._phase != _IDLE:  # llhttp stopped inside the request
                raise Refusal(400, "an upgrade is not supported") from None
            return
        except HttpParserInvalidMethodError:
            raise Refusal(400, "malformed request line: unknown method") from None
        except HttpParserInvalidURLError:
            raise Refusal(400, "malformed request target") from None
        except HttpParserError as exc:
            if self._refusal is not None:  # ours, raised in a callback
                raise self._refusal from None
            text = str(exc) or "malformed request"
            raise Refusal(505 if "HTTP version" in text else 400, text) from None
        if turns != self._turns and phase != _IDLE and self._phase == _HEAD:
            self._head_uncounted = True  # how much of the piece is the new head's is not known
        if turns == self._turns or (phase == _IDLE and self._phase == _HEAD):  # the slice is this phase's
            if self._phase == _HEAD:
                self._head_bytes += size
                if self._head_bytes > MAX_HEAD_BYTES:
                    raise Refusal(431, "the request head is too long")
                if len(self._raw) > MAX_HEADERS:  # at most a slice's worth of fields past the bound
                    raise Refusal(431, "too many header fields")
            elif self._phase == _BODY and self._chunked and turns == self._turns:
                self._framing += size - (self._body_size - body_before)
                if self._framing > MAX_TRAILER_BYTES + CHUNK_FRAMING * self._chunks:
                    raise Refusal(400, "chunk extensions or trailers are too long")

    # -- llhttp's callbacks --------------------------------------------------------------------
    def on_message_begin(self) -> None:
        self._phase = _HEAD
        self._turns += 1

    def on_url(self, url: bytes) -> None:
        self._url += url  # its size is bounded with the head's (`_feed`, `on_headers_complete`)

    def on_header(self, name: bytes, value: bytes) -> None:
        if self._phase == _BODY:  # a trailer: dropped, but counted
            self._trailers += 1
            self._trailer_bytes += len(name) + len(value) + 4
            if self._trailers > MAX_HEADERS or self._trailer_bytes > MAX_TRAILER_BYTES:
                self._refuse(431, "the trailer fields are too many or too long")
            return
        # Only kept here: their number and size are bounded after each slice (`_feed`), exactly
        # once the head is whole, and they are read then, in one pass.
        self._raw.append((name, value))

    def on_headers_complete(self) -> None:
        self._phase = _BODY
        self._turns += 1
        parser = self._parser
        raw = self._raw
        if len(raw) > MAX_HEADERS:
            self._refuse(431, "too many header fields")
        # Counted exactly only when the pieces could hold a head over the bound: those counted so
        # far and this one, unless the head began inside a piece that also ended a request.
        if (self._head_uncounted or self._head_bytes + self._piece > MAX_HEAD_BYTES) and (
            len(self._url) + sum([len(name) + len(value) for name, value in raw]) + 4 * len(raw) > MAX_HEAD_BYTES
        ):
            self._refuse(431, "the request head is too long")
        version = parser.get_http_version()
        method = parser.get_method()
        if method == b"CONNECT":
            self._refuse(400, "CONNECT is not supported: this is not a proxy")
        if version != "1.1" and version != "1.0":
            self._refuse(505, f"HTTP/{version} is not supported")
        values = b"\t".join([value for _, value in raw])
        if len(values.translate(None, _CTL)) != len(values):  # llhttp refuses them too
            self._refuse(400, "a control character in a header value")
        headers = self._headers = [(name.decode("latin-1"), value.strip(b" \t").decode("latin-1")) for name, value in raw]
        hosts = 0
        expect = False
        length = None
        for name, value in headers:
            if len(name) not in _FRAMING_SIZES:
                continue
            lowered = name.lower()
            if lowered == "host":
                hosts += 1
            elif lowered == "content-length":
                length = int(value)  # llhttp has checked it: digits, one header, no overflow
            elif lowered == "transfer-encoding":
                if self._chunked:  # llhttp misses some duplicates (`chunked\t` then `chunked`)
                    self._refuse(400, "more than one Transfer-Encoding field")
                if value.lower() != "chunked":
                    self._refuse(501, f"transfer coding {value!r} is not supported")
                if version == "1.0":
                    self._refuse(400, "chunked transfer coding on HTTP/1.0")
                self._chunked = True
            elif lowered == "expect":
                expect = value.lower() == "100-continue"
        if hosts != 1 and (hosts or version == "1.1"):
            self._refuse(400, "an HTTP/1.1 request carries exactly one Host header")
        if self._chunked and length is not None:  # llhttp refuses it too
            self._refuse(400, "both Content-Length and Transfer-Encoding")
        if length is not None and length > self._max_body:
            self._refuse(413, f"the body is over {self._max_body} bytes")
        try:
            self._path, self._query = _target(self._url)
            head = RequestHead(method.decode("ascii"), self._path, self._query, "HTTP/1.1" if version == "1.1" else "HTTP/1.0", headers, length, self._chunked)
            self._environ = self._on_head(head)  # before a byte of the body is parsed
        except Refusal as refusal:
            self._refusal = refusal
            raise
        self._head = head
        if length:
            self._take(length)  # all of it now: a body that cannot fit is refused before it is sent
        self.wants_continue = expect and version == "1.1" and head.has_body

    def on_body(self, body: bytes) -> None:
        self._body_size += len(body)
        if self._body_size > self._max_body:
            self._refuse(413, f"the body is over {self._max_body} bytes")
        if self._chunked:
            self._take(len(body))
        self._body.append(body)

    def on_chunk_header(self) -> None:
        self._chunks += 1

    def on_message_complete(self) -> None:
        parser = self._parser
        assert self._head is not None
        self.ready.append(
            ParsedRequest(
                head=self._head,
                environ=self._environ,
                body=b"".join(self._body),
                keep_alive=parser.should_keep_alive() and not parser.should_upgrade(),
                reserved=self._reserved,
            )
        )
        self.wants_continue = False
        self._phase = _IDLE
        self._turns += 1
        self._reset()

    def _refuse(self, status: int, why: str, headers: Sequence[tuple[str, str]] = ()) -> None:
        """From a callback: llhttp then stops with a callback error, which `_feed` turns into this."""
        self._refusal = Refusal(status, why, headers=headers)
        raise self._refusal


def _target(url: bytes) -> tuple[str, str]:
    """PATH_INFO (percent-decoded, latin-1) and QUERY_STRING of an origin-, absolute- or asterisk-form target."""
    if url == b"*":
        return "", ""
    url = url.partition(b"#")[0]  # a fragment is the client's own, never part of the target
    if not url.startswith(b"/"):
        if b"://" not in url:
            return url.decode("latin-1"), ""
        try:
            parts = urlsplit(url)  # absolute-form (RFC 9112 §3.2.2); llhttp has checked its characters
        except ValueError:
            raise Refusal(400, "malformed request target") from None
        path, query = parts.path or b"/", parts.query
    else:
        path, _, query = url.partition(b"?")
    text = path.decode("latin-1")
    if "%" in text:
        text = unquote_to_bytes(text).decode("latin-1")
    return text, query.decode("latin-1")
