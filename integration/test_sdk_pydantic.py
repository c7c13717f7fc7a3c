"""The pydantic shop as a program built on the official MCP Python SDK client sees it.

``sdk_pydantic_driver.py`` (in the peers venv, a separate process: software nobody here wrote)
lists the tools of ``mcpsync serve integration/fixtures/pydantic_app.py`` and calls them, once per
client mode. Its jsonschema accepts every schema mcpsync derived from the models and the arguments
sent; its ``call_tool`` checks each structured result against the tool's output schema itself, so a
call that comes back as a result (not an exception) passed that check.
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
SERVER_CMD = [sys.executable, "-m", "mcpsync", "serve", str(APP)]
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
    receipts = report["calls"]["receipts"]
    assert receipts["structured"] == {"result": [{"orderId": "order-7-2", "items": 5, "paidBy": "card"},
                                                 {"orderId": "order-8-2", "items": 5, "paidBy": "voucher"}]}
    assert report["calls"]["ship"]["structured"] == {"weight_kg": 3.5, "fragile": True}


def test_the_function_got_the_model_the_sdk_sent(report: dict[str, Any]) -> None:
    assert report["calls"]["describe"] == {"isError": False, "text": "Order customer_id=7 first=Line(ABC-1 x2) payment=Card", "structured": None}


def test_invalid_arguments_are_a_result_with_pydantics_message(report: dict[str, Any]) -> None:
    assert report["calls"]["invalid"] == {
        "isError": True, "structured": None,
        "text": "Invalid arguments for tool 'place_order' at 'order/lines/0/sku': String should match pattern '^[A-Z]{3}-\\d{1,6}$'; "
                "at 'order/lines/0/quantity': Input should be greater than or equal to 1"}
