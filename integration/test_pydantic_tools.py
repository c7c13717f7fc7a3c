"""Pydantic models as tool parameters and results, over a real `python -m mcpsync serve` child, in both eras.

The fixture (integration/fixtures/pydantic_app.py) is a shop: an `Order` model with aliases,
constraints, nested `Line` models, a discriminated union and a validator of its own, a `Receipt`
model returned, a list of each, and a pydantic dataclass. A client must see pydantic's schema
inlined (no `$ref`), the function must get the model instance, a rejection must be pydantic's own
message naming the field (bounded whatever the client sent), and a returned model must be
structured content that its output schema accepts.

And the other side of "optional": a server without pydantic never imports it, even where pydantic
is installed (plain_app.py).
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from typing import Any

import jsonschema
import pytest

from wire import REPO_ROOT, EraClient, ServerProcess, base_env, fixture, serve_argv

pytestmark = pytest.mark.timeout(60)

ERAS = ["handshake", "modern"]
ORDER = {"customerId": 7, "lines": [{"sku": "ABC-1", "quantity": 2}, {"sku": "XYZ-42", "quantity": 3}],
         "payment": {"kind": "card", "last4": "4242"}}


@pytest.fixture(scope="module")
def servers():
    """One shop server per era, started on first use, for this module's tests (none changes it)."""
    started: dict[str, tuple[ServerProcess, EraClient]] = {}
    yield started
    for proc, _ in started.values():
        proc.cleanup()


@pytest.fixture(params=ERAS)
def client(request: pytest.FixtureRequest, servers: dict[str, tuple[ServerProcess, EraClient]]) -> EraClient:
    era = request.param
    if era not in servers or servers[era][0].proc.poll() is not None:
        proc = ServerProcess(serve_argv(fixture("pydantic_app.py"))).__enter__()
        servers[era] = (proc, EraClient(proc, era))
    return servers[era][1]


def tools_of(client: EraClient) -> dict[str, dict[str, Any]]:
    return {tool["name"]: tool for tool in client.result("tools/list")["tools"]}


def error_text(result: dict[str, Any]) -> str:
    assert result["isError"] is True, result
    assert [block["type"] for block in result["content"]] == ["text"], result
    return result["content"][0]["text"]


# -- the schema a client sees -----------------------------------------------------------------------

def test_the_listing_shows_the_models_schema_inlined_with_descriptions_constraints_and_aliases(client: EraClient) -> None:
    tools = tools_of(client)
    place = tools["place_order"]
    assert "$ref" not in json.dumps(place) and "$defs" not in json.dumps(place)
    jsonschema.Draft202012Validator.check_schema(place["inputSchema"])
    order = place["inputSchema"]["properties"]["order"]
    assert place["inputSchema"]["required"] == ["order"]
    assert order["description"] == "An order for the shop."
    assert order["additionalProperties"] is False  # extra="forbid"
    assert order["required"] == ["customerId", "lines", "payment"]  # by alias: the wire's names
    assert order["properties"]["customerId"] == {"description": "the customer's number", "exclusiveMinimum": 0, "type": "integer"}
    line = order["properties"]["lines"]["items"]
    assert order["properties"]["lines"]["minItems"] == 1
    assert line["title"] == "Line" and line["description"] == "One line of an order."
    assert line["properties"] == {
        "sku": {"description": "stock keeping unit, such as ABC-12", "pattern": r"^[A-Z]{3}-\d{1,6}$", "type": "string"},
        "quantity": {"description": "how many", "maximum": 99, "minimum": 1, "type": "integer"},
    }
    payment = order["properties"]["payment"]
    assert payment["discriminator"] == {"propertyName": "kind"}  # its mapping pointed into the $defs
    assert [choice["title"] for choice in payment["oneOf"]] == ["Card", "Voucher"]
    assert place["outputSchema"]["properties"]["paidBy"] == {"enum": ["card", "voucher"], "type": "string"}
    assert place["outputSchema"]["required"] == ["orderId", "items", "paidBy"]
    assert tools["receipts"]["outputSchema"]["properties"]["result"]["items"]["title"] == "Receipt"
    assert tools["ship"]["inputSchema"]["properties"]["parcel"]["properties"]["weight_kg"] == {"exclusiveMinimum": 0, "maximum": 30, "type": "number"}
    for tool in tools.values():
        jsonschema.Draft202012Validator.check_schema(tool["inputSchema"])
        jsonschema.Draft202012Validator.check_schema(tool.get("outputSchema", {}))


# -- calls ----------------------------------------------------------------------------------------

def test_the_function_receives_the_model_instance(client: EraClient) -> None:
    result = client.call_tool("describe_order", {"order": ORDER})
    assert result["isError"] is False, result
    assert result["content"] == [{"type": "text", "text": "Order customer_id=7 first=Line(ABC-1 x2) payment=Card"}]


def test_a_returned_model_is_structured_content_its_output_schema_accepts(client: EraClient) -> None:
    schema = tools_of(client)["place_order"]["outputSchema"]
    result = client.call_tool("place_order", {"order": ORDER})
    assert result["isError"] is False, result
    assert result["structuredContent"] == {"orderId": "order-7-2", "items": 5, "paidBy": "card"}  # by alias
    jsonschema.validate(result["structuredContent"], schema)
    assert json.loads(result["content"][0]["text"]) == result["structuredContent"]


def test_a_returned_list_of_models_is_the_result_of_structured_content(client: EraClient) -> None:
    schema = tools_of(client)["receipts"]["outputSchema"]
    voucher = {**ORDER, "customerId": 8, "lines": ORDER["lines"][:1], "payment": {"kind": "voucher", "code": "FREE"}}
    result = client.call_tool("receipts", {"orders": [ORDER, voucher]})
    assert result["structuredContent"] == {"result": [{"orderId": "order-7-2", "items": 5, "paidBy": "card"},
                                                      {"orderId": "order-8-1", "items": 2, "paidBy": "voucher"}]}
    jsonschema.validate(result["structuredContent"], schema)


def test_a_pydantic_dataclass_goes_both_ways(client: EraClient) -> None:
    result = client.call_tool("ship", {"parcel": {"weight_kg": 2.5, "fragile": True}})
    assert result["structuredContent"] == {"weight_kg": 3.5, "fragile": True}
    assert error_text(client.call_tool("ship", {"parcel": {"weight_kg": 31}})) == (
        "Invalid arguments for tool 'ship' at 'parcel/weight_kg': Input should be less than or equal to 30")


@pytest.mark.parametrize("order, message", [
    ({**ORDER, "customerId": 0}, "at 'order/customerId': Input should be greater than 0"),
    ({**ORDER, "lines": [{"sku": "abc", "quantity": 2}]}, "at 'order/lines/0/sku': String should match pattern '^[A-Z]{3}-\\d{1,6}$'"),
    ({**ORDER, "lines": [{"sku": "ABC-1"}]}, "at 'order/lines/0/quantity': Field required"),
    ({**ORDER, "lines": ORDER["lines"][:1] * 2}, "at 'order/lines': Value error, each sku may appear on one line only"),
    ({**ORDER, "payment": {"kind": "cash"}},
     "at 'order/payment': Input tag 'cash' found using 'kind' does not match any of the expected tags: 'card', 'voucher'"),
    ({**ORDER, "coupon": "X"}, "at 'order/coupon': Extra inputs are not permitted"),
    ({**ORDER, "customerId": "seven", "lines": []},
     "at 'order/customerId': Input should be a valid integer, unable to parse string as an integer; "
     "at 'order/lines': List should have at least 1 item after validation, not 0"),
    ("an order", "at 'order': Input should be an object"),
], ids=["gt", "pattern", "missing", "validator", "discriminator", "extra", "two-errors", "wrong-type"])
def test_invalid_arguments_are_pydantics_own_message_naming_the_field(client: EraClient, order: Any, message: str) -> None:
    assert error_text(client.call_tool("place_order", {"order": order})) == f"Invalid arguments for tool 'place_order' {message}"


def test_what_pydantic_does_not_see_is_still_refused_as_before(client: EraClient) -> None:
    """A missing or unknown argument is the tool's own schema's business (jsonschema's message)."""
    assert error_text(client.call_tool("place_order", {})) == "Invalid arguments for tool 'place_order': 'order' is a required property"
    assert error_text(client.call_tool("place_order", {"order": ORDER, "rush": True})) == (
        "Invalid arguments for tool 'place_order': Additional properties are not allowed ('rush' was unexpected)")


# -- hostile input --------------------------------------------------------------------------------

def test_a_huge_string_is_named_never_echoed(client: EraClient) -> None:
    huge = "Z" * 2_000_000
    text = error_text(client.call_tool("place_order", {"order": {**ORDER, "note": huge, "payment": {"kind": huge}}}))
    assert len(text) < 700 and "Z" * 300 not in text, text[:1000]
    assert text.startswith("Invalid arguments for tool 'place_order' at 'order/payment': Input tag 'ZZZZ"), text[:200]
    assert "; at 'order/note': String should have at most 200 characters" in text


def test_a_huge_key_is_cut_short(client: EraClient) -> None:
    key = "k" * 100_000
    text = error_text(client.call_tool("place_order", {"order": {**ORDER, key: 1}}))
    assert len(text) < 400 and text.endswith("...': Extra inputs are not permitted"), text[:500]


def test_deep_nesting_is_refused_as_too_deep(client: EraClient) -> None:
    deep: Any = "x"
    for _ in range(600):
        deep = [deep]
    text = error_text(client.call_tool("place_order", {"order": {**ORDER, "note": deep}}))
    assert text == "Invalid arguments for tool 'place_order' at 'order': nests 601 levels of arrays and objects, too deep to check"


def test_many_errors_are_counted_not_listed(client: EraClient) -> None:
    text = error_text(client.call_tool("receipts", {"orders": ["x"] * 50_000}))
    assert text == ("Invalid arguments for tool 'receipts' at 'orders/0': Input should be an object; "
                    "at 'orders/1': Input should be an object; at 'orders/2': Input should be an object; and 49997 more")
    assert client.call_tool("place_order", {"order": ORDER})["isError"] is False  # and the server is fine


# -- optional: no pydantic unless the app uses it --------------------------------------------------

@pytest.mark.parametrize("era", ERAS)
def test_serving_a_plain_app_never_imports_pydantic(era: str) -> None:
    assert importlib.util.find_spec("pydantic") is not None, "pydantic must be installed for this test to mean anything"
    with ServerProcess(serve_argv(fixture("plain_app.py"))) as proc:
        client = EraClient(proc, era)
        assert [tool["name"] for tool in client.result("tools/list")["tools"]] == ["grow", "loaded"]
        assert client.call_tool("grow", {"box": {"width": 2}})["structuredContent"] == {"width": 3, "height": 2}
        assert client.call_tool("grow", {"box": {"width": "2"}})["isError"] is True  # jsonschema's path, loaded on need
        for package in ("pydantic", "pydantic_core"):
            assert client.call_tool("loaded", {"prefix": package})["structuredContent"] == {"result": []}
        assert client.call_tool("loaded", {"prefix": "jsonschema"})["structuredContent"]["result"], "the control: jsonschema was loaded"


def test_importing_mcpsync_never_imports_pydantic() -> None:
    code = ("import sys, mcpsync, mcpsync.client, mcpsync.catalog.models, mcpsync.catalog.schema; "
            "print(sorted(n for n in sys.modules if n.partition('.')[0] in ('pydantic', 'pydantic_core')))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30, env=base_env(), cwd=REPO_ROOT)
    assert (done.returncode, done.stdout) == (0, "[]\n"), done.stderr


def test_the_shop_does_import_pydantic(client: EraClient) -> None:
    """The control for the two above: `loaded` sees pydantic where the app uses it."""
    assert "pydantic.main" in client.call_tool("loaded", {"prefix": "pydantic"})["structuredContent"]["result"]
