"""mcpsync's own client answering mcpsync's own server's questions, in both eras, over stdio and HTTP.

One script, one set of callbacks (`mcpsync.connect(..., elicitation=, sampling=, roots=)`): in the
handshake era the server sends requests that the callbacks answer; in 2026-07-28 the client follows
`input_required` through the same callbacks. The script sees the same results either way. The
server is `integration/fixtures/asking_app.py` under `python -m mcpsync serve`.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import uuid
from typing import Any, Iterator

import pytest

import mcpsync
from mcpsync import Era

from wire import DEFAULT_TIMEOUT as LONG
from wire import REPO_ROOT, base_env, fixture

pytestmark = pytest.mark.timeout(60)

APP = fixture("asking_app.py")
ERAS = {"legacy": Era.HANDSHAKE, "modern": Era.MODERN}


class Callbacks:
    """Answers like a person and a model would, and remembers what it was asked."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, dict[str, Any]]] = []

    def elicitation(self, params: dict[str, Any]) -> dict[str, Any]:
        self.asked.append(("elicitation", params))
        if params.get("mode") == "url":
            return {"action": "accept"}
        fields = params["requestedSchema"].get("properties", {})
        content = {name: (41 if spec.get("type") == "integer" else "Ada") for name, spec in fields.items()}
        return {"action": "accept", "content": content}

    def sampling(self, params: dict[str, Any]) -> dict[str, Any]:
        self.asked.append(("sampling", params))
        return {"role": "assistant", "content": {"type": "text", "text": "Waves fold on stone"}, "model": "mock-1", "stopReason": "endTurn"}

    def roots(self, params: dict[str, Any]) -> dict[str, Any]:
        self.asked.append(("roots", params))
        return {"roots": [{"uri": "file:///work/project", "name": "project"}]}


@pytest.fixture(scope="module")
def http_url() -> Iterator[str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "mcpsync", "serve", "--http", "127.0.0.1:0", APP],
        stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, env=base_env(), cwd=REPO_ROOT, text=True,
    )
    try:
        assert proc.stderr is not None
        url = None
        for line in proc.stderr:  # the server announces its URL once bound
            found = re.search(r"(http://\S+/mcp)", line)
            if found:
                url = found.group(1)
                break
        assert url, "the HTTP server did not announce its URL"
        yield url
    finally:
        proc.terminate()
        proc.wait(LONG)


def _connect(target: str, mode: str, callbacks: Callbacks, **options: Any) -> mcpsync.ClientSession:
    where: Any = target if target.startswith("http") else [sys.executable, "-m", "mcpsync", "serve", APP]
    extra = {"env": base_env(), "cwd": str(REPO_ROOT)} if isinstance(where, list) else {}
    return mcpsync.connect(
        where, mode=mode, elicitation=callbacks.elicitation, sampling=callbacks.sampling, roots=callbacks.roots,
        timeout=LONG, **extra, **options,
    )


def _text(result: dict[str, Any]) -> Any:
    assert result.get("isError") is not True, result
    return json.loads(result["content"][0]["text"])


@pytest.fixture(params=["stdio", "http"])
def target(request: pytest.FixtureRequest) -> str:
    return request.getfixturevalue("http_url") if request.param == "http" else "stdio"


@pytest.mark.parametrize("mode", ERAS)
def test_one_script_gets_the_same_answers_in_both_eras(target: str, mode: str) -> None:
    callbacks = Callbacks()
    with _connect(target, mode, callbacks) as session:
        assert session.era is ERAS[mode]
        assert _text(session.call_tool("ask_name")) == {"action": "accept", "content": {"name": "Ada"}}
        haiku = _text(session.call_tool("ask_model", {"topic": "rain"}))
        assert haiku == {"role": "assistant", "model": "mock-1", "text": "Waves fold on stone", "stopReason": "endTurn"}
        assert _text(session.call_tool("list_roots")) == [{"uri": "file:///work/project", "name": "project"}]
        both = _text(session.call_tool("ask_all"))
        assert both["name"]["content"] == {"name": "Ada"} and both["roots"][0]["name"] == "project"
        two = _text(session.call_tool("two_step", {"nonce": uuid.uuid4().hex}))
        assert (two["name"], two["age"]) == ("Ada", 41)
    sampled = [params for kind, params in callbacks.asked if kind == "sampling"]
    assert sampled[0]["messages"][0]["content"]["text"] == "Write a haiku about rain."
    assert sampled[0]["maxTokens"] == 64 and sampled[0]["systemPrompt"] == "You are a terse poet."


@pytest.mark.parametrize("mode", ERAS)
def test_url_mode_reaches_a_client_that_declared_it(target: str, mode: str) -> None:
    callbacks = Callbacks()
    with _connect(target, mode, callbacks, elicitation_modes=("form", "url")) as session:
        assert session.capabilities["elicitation"] == {"form": {}, "url": {}}
        assert _text(session.call_tool("ask_url")) == {"action": "accept"}
    kind, params = callbacks.asked[-1]
    assert params["mode"] == "url" and params["url"].startswith("https://")
    assert ("elicitationId" in params) is (mode == "legacy")  # 2026-07-28 has none


@pytest.mark.parametrize("mode", ERAS)
def test_url_mode_is_refused_for_a_client_that_handles_forms_only(target: str, mode: str) -> None:
    callbacks = Callbacks()
    with _connect(target, mode, callbacks) as session:
        if mode == "legacy":
            result = session.call_tool("ask_url")
            assert result["isError"] is True and "URL-mode elicitation" in result["content"][0]["text"]
        else:
            with pytest.raises(mcpsync.McpError) as refused:
                session.call_tool("ask_url")
            assert refused.value.code == -32021 and refused.value.data["requiredCapabilities"] == {"elicitation": {"url": {}}}
    assert callbacks.asked == []


def test_a_question_without_its_callback_is_a_clear_error_in_2026_07_28() -> None:
    with mcpsync.connect([sys.executable, "-m", "mcpsync", "serve", APP], mode="modern", sampling=Callbacks().sampling,
                         env=base_env(), cwd=str(REPO_ROOT), timeout=LONG) as session:
        with pytest.raises(mcpsync.McpError) as refused:  # the server sees no elicitation capability
            session.call_tool("ask_name")
        assert refused.value.code == -32021


def test_elicitation_modes_are_checked() -> None:
    with pytest.raises(ValueError):
        mcpsync.ClientSession(object(), elicitation=Callbacks().elicitation, elicitation_modes=("form", "voice"))
