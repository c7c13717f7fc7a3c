"""The pydantic shop as programs built on the official MCP SDK clients see it: Python and TypeScript.

``sdk_pydantic_driver.py`` (in the peers venv, a separate process: software nobody here wrote)
lists the tools of ``mcpsync serve integration/fixtures/pydantic_app.py`` and calls them, once per
client mode. Its jsonschema accepts every schema mcpsync derived from the models and the arguments
sent; its ``call_tool`` checks each structured result against the tool's output schema itself, so a
call that comes back as a result (not an exception) passed that check.

``ts_pydantic_driver.mjs`` does the same with the TypeScript SDK's client (scripts/peers-npm's
pinned SDK), whose ``callTool`` checks structured results with its own validator (Ajv), which also
judges the arguments against the input schemas.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.timeout(120)

DRIVER = Path(__file__).with_name("sdk_pydantic_driver.py")
APP = Path(__file__).with_name("fixtures") / "pydantic_app.py"
TS_DRIVER = Path(__file__).with_name("ts_pydantic_driver.mjs")
SERVER_CMD = [sys.executable, "-m", "mcpsync", "serve", str(APP)]
RECEIPTS = {"result": [{"orderId": "order-7-2", "items": 5, "paidBy": "card"}, {"orderId": "order-8-2", "items": 5, "paidBy": "voucher"}]}
DRIVER_TIMEOUT = 60.0  # the driver bounds itself at 30 s (+15 s watchdog); this is the backstop


@pytest.fixture(scope="module", params=["legacy", "modern", "pinned"])
def report(request: pytest.FixtureRequest, peers_python: str, bounded: Any, repo_root: Path) -> dict[str, Any]:
    args = [peers_python, str(DRIVER), "--mode", request.param, "--cwd", str(repo_root), "--", *SERVER_CMD]
    done = bounded(args, timeout=DRIVER_TIMEOUT, cwd=repo_root)
    assert done.returncode == 0, done.stderr[-8000:]
    return json.loads(done.stdout)


def test_the_sdk_lists_the_models_schemas(report: dict[str, Any]) -> None:
    tools = {tool["name"]: tool for tool in report["tools"]}
    assert list(tools) == ["place_order", "describe_order", "receipts", "ship", "loaded"]
    order = tools["place_order"]["inputSchema"]["properties"]["order"]
    assert order["properties"]["customerId"]["description"] == "the customer's number"
    assert order["properties"]["lines"]["items"]["properties"]["quantity"]["maximum"] == 99
    assert "$ref" not in json.dumps(report["tools"])
    assert tools["place_order"]["outputSchema"]["title"] == "Receipt"


def test_a_returned_model_passes_the_sdks_own_output_schema_check(report: dict[str, Any]) -> None:
    assert report["calls"]["place"] == {"isError": False, "text": '{"orderId":"order-7-2","items":5,"paidBy":"card"}',
                                        "structured": {"orderId": "order-7-2", "items": 5, "paidBy": "card"}}
    assert report["calls"]["receipts"]["structured"] == RECEIPTS
    assert report["calls"]["ship"]["structured"] == {"weight_kg": 3.5, "fragile": True}


def test_the_function_got_the_model_the_sdk_sent(report: dict[str, Any]) -> None:
    assert report["calls"]["describe"] == {"isError": False, "text": "Order customer_id=7 first=Line(ABC-1 x2) payment=Card", "structured": None}


def test_invalid_arguments_are_a_result_with_pydantics_message(report: dict[str, Any]) -> None:
    assert report["calls"]["invalid"] == {
        "isError": True, "structured": None,
        "text": "Invalid arguments for tool 'place_order' at 'order/lines/0/sku': String should match pattern '^[A-Z]{3}-\\d{1,6}$'; "
                "at 'order/lines/0/quantity': Input should be greater than or equal to 1"}


# -- the TypeScript SDK's client --------------------------------------------------------------------

@pytest.fixture(scope="module")
def ts_report(node: str, npm_entry: Any, bounded: Any, repo_root: Path) -> dict[str, Any]:
    npm_entry("everything")  # scripts/peers-npm installs the pinned SDK with the servers
    sdk = repo_root / ".peers-npm" / "node_modules" / "@modelcontextprotocol" / "sdk"
    done = bounded([node, str(TS_DRIVER), str(sdk), "--", *SERVER_CMD], timeout=DRIVER_TIMEOUT, cwd=repo_root)
    assert done.returncode == 0, done.stderr[-8000:]
    return json.loads(done.stdout)


def test_the_typescript_client_accepts_the_models_structured_output(ts_report: dict[str, Any]) -> None:
    assert ts_report["serverInfo"]["name"] == "pydantic-shop"
    assert ts_report["calls"]["place"]["structured"] == {"orderId": "order-7-2", "items": 5, "paidBy": "card"}
    assert ts_report["calls"]["receipts"]["structured"] == RECEIPTS
    assert ts_report["calls"]["ship"]["structured"] == {"weight_kg": 3.5, "fragile": True}


def test_the_typescript_validator_reads_the_constraints_pydantic_enforces(ts_report: dict[str, Any]) -> None:
    """The arguments pydantic accepts fit the input schema in Ajv's reading too, and those it refuses
    (customerId 0, below `gt=0`) do not: the schema says what the model checks."""
    assert ts_report["inputValid"] == {"place": True, "receipts": True, "ship": True, "invalid": False}
    assert ts_report["calls"]["invalid"] == {
        "isError": True, "structured": None, "text": "Invalid arguments for tool 'place_order' at 'order/customerId': Input should be greater than 0"}
