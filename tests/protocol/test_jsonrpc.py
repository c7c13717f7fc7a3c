"""Tests for mcpsync.protocol.jsonrpc: decoding frames once, encoding compact lines.

The framing rows of BEHAVIOR.md that `decode()` decides are pinned here, table-driven: what each
kind of broken frame is answered with (code, and the id it is answered under), that notifications
are never answered, and that ids keep their JSON type.
"""

from __future__ import annotations

import pytest
import ujson

from mcpsync.protocol.jsonrpc import (
    EncodeError,
    ErrorCode,
    Invalid,
    McpError,
    Notification,
    Request,
    Response,
    decode,
    decode_object,
    encode,
    error_frame,
    invalid_params,
    is_request_id,
    method_not_found,
    notification_frame,
    result_frame,
)

pytestmark = pytest.mark.timeout(30)


def frame(**fields: object) -> bytes:
    return ujson.dumps(fields).encode()


# -- decode: what a broken frame is answered with ----------------------------------------------------

# (line, code, answer id). Every row is answered (answer=True).
ANSWERED_INVALID = [
    pytest.param(b"this is not json", ErrorCode.PARSE_ERROR, None, id="not-json"),
    pytest.param(b'{"jsonrpc":"2.0","id":1,"method":"x"', ErrorCode.PARSE_ERROR, None, id="truncated-object"),
    pytest.param(b'{"jsonrpc":"2.0","id":1,"method":"x"} trailing', ErrorCode.PARSE_ERROR, None, id="trailing-garbage"),
    pytest.param(b"", ErrorCode.PARSE_ERROR, None, id="empty"),
    pytest.param(b'{"jsonrpc":"2.0","id":1,"method":"\xff"}', ErrorCode.PARSE_ERROR, None, id="invalid-utf8"),
    pytest.param(b'{"jsonrpc":"2.0","id":1,"method":"\xed\xa0\x80"}', ErrorCode.PARSE_ERROR, None, id="utf8-encoded-surrogate"),
    pytest.param(b"\xc0\xaf", ErrorCode.PARSE_ERROR, None, id="overlong-utf8"),
    pytest.param(b'[{"jsonrpc":"2.0","id":1,"method":"ping"}]', ErrorCode.INVALID_REQUEST, None, id="batch-array"),
    pytest.param(b"[]", ErrorCode.INVALID_REQUEST, None, id="empty-array"),
    pytest.param(b"42", ErrorCode.INVALID_REQUEST, None, id="scalar-number"),
    pytest.param(b'"a string"', ErrorCode.INVALID_REQUEST, None, id="scalar-string"),
    pytest.param(b"null", ErrorCode.INVALID_REQUEST, None, id="scalar-null"),
    pytest.param(b"true", ErrorCode.INVALID_REQUEST, None, id="scalar-bool"),
    pytest.param(b"{}", ErrorCode.INVALID_REQUEST, None, id="empty-object"),
    pytest.param(b'{"jsonrpc":"2.0","id":1}', ErrorCode.INVALID_REQUEST, None, id="neither-request-nor-response"),
    pytest.param(b'{"jsonrpc":"2.0","id":true,"method":"ping"}', ErrorCode.INVALID_REQUEST, None, id="id-true"),
    pytest.param(b'{"jsonrpc":"2.0","id":false,"method":"ping"}', ErrorCode.INVALID_REQUEST, None, id="id-false"),
    pytest.param(b'{"jsonrpc":"2.0","id":1.0,"method":"ping"}', ErrorCode.INVALID_REQUEST, None, id="id-float-integral"),
    pytest.param(b'{"jsonrpc":"2.0","id":1.5,"method":"ping"}', ErrorCode.INVALID_REQUEST, None, id="id-float"),
    pytest.param(b'{"jsonrpc":"2.0","id":1e3,"method":"ping"}', ErrorCode.INVALID_REQUEST, None, id="id-exponent"),
    pytest.param(b'{"jsonrpc":"2.0","id":null,"method":"ping"}', ErrorCode.INVALID_REQUEST, None, id="id-null"),
    pytest.param(b'{"jsonrpc":"2.0","id":[1],"method":"ping"}', ErrorCode.INVALID_REQUEST, None, id="id-array"),
    pytest.param(b'{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}', ErrorCode.INVALID_REQUEST, None, id="id-object"),
    # a usable id: answered under that id, with its JSON type
    pytest.param(b'{"jsonrpc":"1.0","id":7,"method":"ping"}', ErrorCode.INVALID_REQUEST, 7, id="jsonrpc-1.0"),
    pytest.param(b'{"id":"7","method":"ping"}', ErrorCode.INVALID_REQUEST, "7", id="jsonrpc-missing"),
    pytest.param(b'{"jsonrpc":2.0,"id":7,"method":"ping"}', ErrorCode.INVALID_REQUEST, 7, id="jsonrpc-number"),
    pytest.param(b'{"jsonrpc":"2.0","id":7,"method":5}', ErrorCode.INVALID_REQUEST, 7, id="method-number"),
    pytest.param(b'{"jsonrpc":"2.0","id":7,"method":null}', ErrorCode.INVALID_REQUEST, 7, id="method-null"),
    pytest.param(b'{"jsonrpc":"2.0","id":7,"method":["ping"]}', ErrorCode.INVALID_REQUEST, 7, id="method-array"),
    pytest.param(b'{"jsonrpc":"2.0","id":7,"method":"ping","params":[1]}', ErrorCode.INVALID_PARAMS, 7, id="params-array"),
    pytest.param(b'{"jsonrpc":"2.0","id":"x","method":"ping","params":"s"}', ErrorCode.INVALID_PARAMS, "x", id="params-string"),
    pytest.param(b'{"jsonrpc":"2.0","id":0,"method":"ping","params":3}', ErrorCode.INVALID_PARAMS, 0, id="params-number"),
    pytest.param(b'{"jsonrpc":"2.0","id":-1,"method":"ping","params":true}', ErrorCode.INVALID_PARAMS, -1, id="params-bool"),
    pytest.param(b'{"jsonrpc":"2.0","id":"n","method":"ping","params":null}', ErrorCode.INVALID_PARAMS, "n", id="params-null"),
]


@pytest.mark.parametrize("line, code, answer_id", ANSWERED_INVALID)
def test_a_broken_frame_is_answered_with_the_matching_error(line: bytes, code: int, answer_id: object) -> None:
    message = decode(line)
    assert isinstance(message, Invalid)
    assert message.answer is True
    assert message.error.code == code
    assert message.answer_id == answer_id
    assert type(message.answer_id) is type(answer_id)


def test_the_answer_id_of_a_broken_request_keeps_its_json_type() -> None:
    as_string = decode(b'{"jsonrpc":"1.0","id":"7","method":"ping"}')
    as_number = decode(b'{"jsonrpc":"1.0","id":7,"method":"ping"}')
    assert isinstance(as_string, Invalid) and isinstance(as_number, Invalid)
    assert as_string.answer_id == "7" and as_number.answer_id == 7
    assert error_frame(as_string.answer_id, as_string.error)["id"] == "7"
    assert error_frame(as_number.answer_id, as_number.error)["id"] == 7


def test_error_messages_say_what_was_wrong() -> None:
    cases = {
        b"[1]": "batch",
        b'{"jsonrpc":"2.0","id":true,"method":"x"}': "id",
        b'{"jsonrpc":"1.0","id":1,"method":"x"}': "jsonrpc",
        b'{"jsonrpc":"2.0","id":1,"method":1}': "method",
        b'{"jsonrpc":"2.0","id":1,"method":"x","params":[]}': "params",
    }
    for line, word in cases.items():
        message = decode(line)
        assert isinstance(message, Invalid)
        assert word in message.error.message, (line, message.error.message)


# -- notifications are never answered ----------------------------------------------------------------

BROKEN_NOTIFICATIONS = [
    pytest.param(b'{"jsonrpc":"1.0","method":"notifications/x"}', id="jsonrpc-1.0"),
    pytest.param(b'{"method":"notifications/x"}', id="jsonrpc-missing"),
    pytest.param(b'{"jsonrpc":"2.0","method":5}', id="method-number"),
    pytest.param(b'{"jsonrpc":"2.0","method":null,"params":{}}', id="method-null"),
    pytest.param(b'{"jsonrpc":"2.0","method":"notifications/x","params":[1]}', id="params-array"),
    pytest.param(b'{"jsonrpc":"2.0","method":"notifications/x","params":"s"}', id="params-string"),
    pytest.param(b'{"jsonrpc":"2.0","method":"notifications/x","params":null}', id="params-null"),
]


@pytest.mark.parametrize("line", BROKEN_NOTIFICATIONS)
def test_a_broken_notification_is_never_answered(line: bytes) -> None:
    message = decode(line)
    assert isinstance(message, Invalid)
    assert message.answer is False


@pytest.mark.parametrize(
    "line, method, params",
    [
        (b'{"jsonrpc":"2.0","method":"notifications/initialized"}', "notifications/initialized", {}),
        (b'{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"7"}}', "notifications/cancelled", {"requestId": "7"}),
        (b'{"jsonrpc":"2.0","method":"no/such/method"}', "no/such/method", {}),
    ],
)
def test_a_valid_notification_is_classified(line: bytes, method: str, params: dict) -> None:
    assert decode(line) == Notification(method, params)


# -- requests and responses ----------------------------------------------------------------------------

@pytest.mark.parametrize(
    "line, expected",
    [
        (b'{"jsonrpc":"2.0","id":1,"method":"ping"}', Request(1, "ping", {})),
        (b'{"jsonrpc":"2.0","id":"abc","method":"tools/list","params":{"cursor":"c"}}', Request("abc", "tools/list", {"cursor": "c"})),
        (b'{"jsonrpc":"2.0","id":-5,"method":"ping"}', Request(-5, "ping", {})),
        (b'{"jsonrpc":"2.0","id":"","method":"ping"}', Request("", "ping", {})),
        (b'{"method":"ping","jsonrpc":"2.0","id":3,"extra":"ignored"}', Request(3, "ping", {})),
        (b'  {"jsonrpc":"2.0","id":1,"method":"ping"}\r\t ', Request(1, "ping", {})),  # JSON whitespace around
    ],
)
def test_a_valid_request_is_classified(line: bytes, expected: Request) -> None:
    assert decode(line) == expected


def test_ids_keep_their_json_type_seven_and_quoted_seven_differ() -> None:
    as_number = decode(b'{"jsonrpc":"2.0","id":7,"method":"ping"}')
    as_string = decode(b'{"jsonrpc":"2.0","id":"7","method":"ping"}')
    assert isinstance(as_number, Request) and isinstance(as_string, Request)
    assert as_number.id == 7 and type(as_number.id) is int
    assert as_string.id == "7" and type(as_string.id) is str
    assert as_number != as_string
    assert len({as_number.id, as_string.id}) == 2
    assert encode(result_frame(as_number.id, {})) == b'{"jsonrpc":"2.0","id":7,"result":{}}\n'
    assert encode(result_frame(as_string.id, {})) == b'{"jsonrpc":"2.0","id":"7","result":{}}\n'


def test_a_large_integer_id_is_echoed_exactly() -> None:
    big = 2**70 + 1
    message = decode(b'{"jsonrpc":"2.0","id":%d,"method":"ping"}' % big)
    assert isinstance(message, Request)
    assert message.id == big
    assert encode(result_frame(message.id, {})) == b'{"jsonrpc":"2.0","id":%d,"result":{}}\n' % big


@pytest.mark.parametrize(
    "line, expected",
    [
        (b'{"jsonrpc":"2.0","id":1,"result":{}}', Response(1, {}, None)),
        (b'{"jsonrpc":"2.0","id":"r","result":{"roots":[]}}', Response("r", {"roots": []}, None)),
        (b'{"jsonrpc":"2.0","id":2,"result":null}', Response(2, None, None)),
        (b'{"jsonrpc":"2.0","id":3,"error":{"code":-32601,"message":"nope"}}', Response(3, None, {"code": -32601, "message": "nope"})),
    ],
)
def test_a_response_is_classified(line: bytes, expected: Response) -> None:
    assert decode(line) == expected


@pytest.mark.parametrize(
    "line",
    [
        b'{"jsonrpc":"2.0","id":true,"result":{}}',
        b'{"jsonrpc":"2.0","id":null,"error":{"code":1,"message":"m"}}',
        b'{"jsonrpc":"2.0","id":1.5,"result":{}}',
        b'{"id":1,"result":{}}',
        b'{"jsonrpc":"2.0","id":1,"error":"boom"}',
    ],
)
def test_a_malformed_response_is_never_answered(line: bytes) -> None:
    message = decode(line)
    assert isinstance(message, Invalid)
    assert message.answer is False


def test_decode_object_classifies_an_already_parsed_object() -> None:
    assert decode_object({"jsonrpc": "2.0", "id": "a", "method": "m"}) == Request("a", "m", {})
    assert decode_object({"jsonrpc": "2.0", "method": "m"}) == Notification("m", {})
    assert decode_object({"jsonrpc": "2.0", "id": 1, "result": 5}) == Response(1, 5, None)


# -- hostile input: an error, never a crash or a stall ----------------------------------------------

HOSTILE = [
    pytest.param(b"[" * 100_000 + b"]" * 100_000, id="deep-arrays"),
    pytest.param(b'{"a":' * 50_000 + b"1" + b"}" * 50_000, id="deep-objects"),
    pytest.param(b'{"jsonrpc":"2.0","id":1,"method":"x","params":' + b'{"a":' * 50_000 + b"1" + b"}" * 50_001, id="deep-params"),
    pytest.param(b"9" * 5000, id="5000-digit-scalar"),
    pytest.param(b'{"jsonrpc":"2.0","id":' + b"9" * 5000 + b',"method":"x"}', id="5000-digit-id"),
    pytest.param(b'{"jsonrpc":"2.0","id":1,"method":"x","params":{"n":' + b"9" * 5000 + b"}}", id="5000-digit-param"),
    pytest.param(b'{"jsonrpc":"2.0","id":1,"method":"x","params":{"n":1' + b"0" * 5000 + b".5}}", id="5000-digit-float"),
    pytest.param(b'{"jsonrpc":"2.0","id":1,"method":"x","params":{"n":1e99999}}', id="huge-exponent"),
    pytest.param(b'{"jsonrpc":"2.0","id":"' + b"\\ud800" * 1000 + b'","method":"x"}', id="lone-surrogate-id"),
    pytest.param(b"\x00" * 1000, id="nul-bytes"),
    pytest.param(b'{"' + b"a" * 1_000_000 + b'":1}', id="long-key"),
]


@pytest.mark.parametrize("line", HOSTILE)
def test_hostile_input_never_crashes_decode(line: bytes) -> None:
    message = decode(line)
    assert isinstance(message, (Invalid, Request, Notification, Response))
    if isinstance(message, Invalid) and message.answer:
        # whatever is answered must itself be encodable (a crash in the writer is a crash too)
        assert encode(error_frame(message.answer_id, message.error)).endswith(b"\n")
    if isinstance(message, Request):
        assert encode(result_frame(message.id, {})).endswith(b"\n")


def test_a_lone_surrogate_id_round_trips_escaped() -> None:
    message = decode(b'{"jsonrpc":"2.0","id":"a\\ud800b","method":"ping"}')
    assert isinstance(message, Request)
    assert message.id == "a\ud800b"
    line = encode(result_frame(message.id, {}))
    assert b"\\ud800" in line
    line.decode("utf-8")  # valid UTF-8 on the wire
    echoed = decode(line.rstrip(b"\n"))
    assert isinstance(echoed, Response) and echoed.id == message.id


@pytest.mark.parametrize("literal", [b"NaN", b"Infinity", b"-Infinity", b"[NaN]", b'{"a":Infinity}'])
def test_non_json_literals_are_a_parse_error(literal: bytes) -> None:
    message = decode(b'{"jsonrpc":"2.0","id":1,"method":"x","params":{"n":' + literal + b"}}")
    assert isinstance(message, Invalid)
    assert message.error.code == ErrorCode.PARSE_ERROR


@pytest.mark.parametrize("text", ["NaN", "Infinity", "-Infinity", "a NaN b"])
def test_the_words_nan_and_infinity_inside_strings_are_fine(text: str) -> None:
    message = decode(frame(jsonrpc="2.0", id=1, method="x", params={"text": text, text: 1}))
    assert message == Request(1, "x", {"text": text, text: 1})


# -- encode ---------------------------------------------------------------------------------------------

def test_encode_is_compact_one_line_and_newline_terminated() -> None:
    line = encode(result_frame(1, {"tools": [{"name": "a", "inputSchema": {"type": "object"}}], "n": 1.5}))
    assert line == b'{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"a","inputSchema":{"type":"object"}}],"n":1.5}}\n'


def test_encode_escapes_newlines_inside_strings_so_a_frame_stays_one_line() -> None:
    line = encode(result_frame(1, {"text": "a\nb\r\nc\u2028d\x00"}))
    assert line.count(b"\n") == 1 and line.endswith(b"\n")
    assert b"\r" not in line
    assert ujson.loads(line)["result"]["text"] == "a\nb\r\nc\u2028d\x00"


def test_encode_keeps_non_ascii_as_utf8_and_does_not_escape_slashes() -> None:
    line = encode(result_frame("é", {"text": "héllo ☃ 🎉", "uri": "file:///a/b"}))
    assert "héllo ☃ 🎉".encode() in line
    assert b"\\u" not in line
    assert b"file:///a/b" in line
    assert line.decode("utf-8")


def test_encode_passes_ujson_its_options_in_ujsons_own_order() -> None:
    """encode() gives ujson.dumps its options by position (for speed): pin that they still mean
    ensure_ascii=False, escape_forward_slashes=False, allow_nan=False, html and keys untouched."""
    message = {"z": "é/<&>", "a": [1.5, 2], "n": None}
    keywords = ujson.dumps(message, ensure_ascii=False, escape_forward_slashes=False, allow_nan=False)
    assert encode(message) == keywords.encode("utf-8") + b"\n"
    assert encode(message) == '{"z":"é/<&>","a":[1.5,2],"n":null}\n'.encode("utf-8")
    with pytest.raises(EncodeError):
        encode({"x": float("inf")})


def test_encode_escapes_lone_surrogates_instead_of_failing() -> None:
    line = encode(result_frame(1, {"text": "bad \udc80 surrogate", "ok": "é"}))
    line.decode("utf-8")
    assert b"\\udc80" in line
    assert ujson.loads(line)["result"]["text"] == "bad \udc80 surrogate"


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf"), object(), b"bytes", {1, 2}])
def test_encode_raises_encode_error_for_what_json_cannot_carry(value: object) -> None:
    with pytest.raises(EncodeError):
        encode(result_frame(1, {"value": value}))


def test_encode_error_is_a_value_error() -> None:
    assert issubclass(EncodeError, ValueError)


def test_encode_error_even_when_a_lone_surrogate_comes_first() -> None:
    with pytest.raises(EncodeError):
        encode({"a": "\ud800", "b": float("nan")})


def test_frame_builders() -> None:
    assert result_frame("x", {"a": 1}) == {"jsonrpc": "2.0", "id": "x", "result": {"a": 1}}
    error = McpError(ErrorCode.INVALID_PARAMS, "bad", {"field": "a"})
    assert error_frame(None, error) == {"jsonrpc": "2.0", "id": None, "error": {"code": -32602, "message": "bad", "data": {"field": "a"}}}
    assert encode(error_frame(None, McpError(ErrorCode.PARSE_ERROR, "Parse error"))) == (
        b'{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}\n'
    )
    assert notification_frame("notifications/tools/list_changed") == {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}
    assert notification_frame("m", {"a": 1}) == {"jsonrpc": "2.0", "method": "m", "params": {"a": 1}}


# -- errors and ids ---------------------------------------------------------------------------------------

def test_error_codes_have_their_wire_values() -> None:
    assert {code.name: int(code) for code in ErrorCode} == {
        "PARSE_ERROR": -32700,
        "INVALID_REQUEST": -32600,
        "METHOD_NOT_FOUND": -32601,
        "INVALID_PARAMS": -32602,
        "INTERNAL_ERROR": -32603,
        "RESOURCE_NOT_FOUND": -32002,
        "HEADER_MISMATCH": -32020,
        "MISSING_CLIENT_CAPABILITY": -32021,
        "UNSUPPORTED_PROTOCOL_VERSION": -32022,
    }


def test_mcp_error_to_error_omits_absent_data_but_keeps_falsy_data() -> None:
    assert McpError(-32600, "m").to_error() == {"code": -32600, "message": "m"}
    assert McpError(-32600, "m", {}).to_error() == {"code": -32600, "message": "m", "data": {}}
    assert McpError(-32600, "m", 0).to_error() == {"code": -32600, "message": "m", "data": 0}
    error = McpError(ErrorCode.INTERNAL_ERROR, "m")
    assert type(error.code) is int and error.code == -32603
    assert str(error) == "m"


def test_error_shortcuts() -> None:
    assert invalid_params("bad", {"x": 1}).to_error() == {"code": -32602, "message": "bad", "data": {"x": 1}}
    error = method_not_found("a/b")
    assert error.code == -32601 and "a/b" in error.message and error.data == {"method": "a/b"}


@pytest.mark.parametrize(
    "value, usable",
    [("7", True), (7, True), (0, True), (-1, True), ("", True), (2**80, True),
     (True, False), (False, False), (1.0, False), (None, False), ([], False), ({}, False)],
)
def test_is_request_id(value: object, usable: bool) -> None:
    assert is_request_id(value) is usable
