"""`notifications/elicitation/complete` (MCP 2025-11-25) against the official Python SDK's client: a
URL-mode elicitation named `pay-42` reaches the SDK's callback with that id, and the SDK's message
handler gets the completion, parsed by its own model, before the call's answer."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.timeout(120)

DRIVER = Path(__file__).with_name("sdk_catalog_driver.py")
APP = Path(__file__).parent / "fixtures" / "payments_app.py"


def test_the_official_sdk_hears_the_url_elicitation_complete_before_the_answer(peers_python: str, bounded: Any) -> None:
    done = bounded([peers_python, str(DRIVER), "complete", "--", sys.executable, "-m", "mcpsync", "serve", str(APP)], timeout=90)
    assert done.returncode == 0, done.stderr
    asked, completed, answered = json.loads(done.stdout)
    assert asked["asked"] == {"mode": "url", "message": "Pay on the bank's page", "url": "https://bank.example/pay/42", "elicitationId": "pay-42"}
    assert completed == {"complete": "pay-42"} and answered == {"answered": "accept"}
