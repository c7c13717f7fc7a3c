"""The engine (and the wire vocabulary under it) is sans-I/O: no threads, sockets, stdio, sleeps or
raw fd reads and writes of its own (STYLE.md habit 1). It runs on whichever thread the transport
picks; only the functions it calls may do I/O.
"""

from __future__ import annotations

import ast
import re
import threading
from pathlib import Path

import pytest

import mcpsync
from tests.helpers import EngineHarness

pytestmark = pytest.mark.timeout(30)

PACKAGE = Path(mcpsync.__file__).resolve().parent
SANS_IO_DIRS = ("engine", "protocol")

FORBIDDEN_TEXT = {
    "threading.Thread": re.compile(r"\bthreading\s*\.\s*Thread\b"),
    "socket": re.compile(r"\bsocket\b"),
    "sys.stdout": re.compile(r"\bsys\s*\.\s*(?:__)?stdout\b"),
    "sys.stdin": re.compile(r"\bsys\s*\.\s*(?:__)?stdin\b"),
    "time.sleep": re.compile(r"\btime\s*\.\s*sleep\b"),
    "os.read": re.compile(r"\bos\s*\.\s*read\b"),
    "os.write": re.compile(r"\bos\s*\.\s*write\b"),
    "print(": re.compile(r"(?<![\w.])print\s*\("),
}
FORBIDDEN_MODULES = {"socket", "select", "selectors", "subprocess", "asyncio"}
FORBIDDEN_NAMES = {("threading", "Thread"), ("time", "sleep"), ("os", "read"), ("os", "write")}


def sources() -> list[Path]:
    found = sorted(path for folder in SANS_IO_DIRS for path in (PACKAGE / folder).glob("*.py"))
    assert found, "no sources found: the test would pass vacuously"
    return found


def code_only(path: Path) -> str:
    """The source with comments and docstrings blanked out, so prose may mention any word."""
    tree = ast.parse(path.read_text())
    lines = path.read_text().splitlines()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant) and isinstance(body[0].value.value, str):
            doc = body[0]
            for number in range(doc.lineno - 1, doc.end_lineno):
                lines[number] = ""
    return "\n".join(re.sub(r"#.*$", "", line) for line in lines)


@pytest.mark.parametrize("path", sources(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_no_io_or_threads_in_the_code(path: Path) -> None:
    code = code_only(path)
    found = [name for name, pattern in FORBIDDEN_TEXT.items() if pattern.search(code)]
    assert not found, f"{path.relative_to(PACKAGE)} uses {found}"


@pytest.mark.parametrize("path", sources(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_no_io_modules_are_imported(path: Path) -> None:
    tree = ast.parse(path.read_text())
    imported: set[str] = set()
    names: set[tuple[str, str]] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            imported.add(node.module.split(".")[0])
            names.update((node.module, alias.name) for alias in node.names)
    assert not imported & FORBIDDEN_MODULES, f"{path.relative_to(PACKAGE)} imports {sorted(imported & FORBIDDEN_MODULES)}"
    assert not names & FORBIDDEN_NAMES, f"{path.relative_to(PACKAGE)} imports {sorted(names & FORBIDDEN_NAMES)}"


def test_the_greps_would_catch_a_violation() -> None:
    sample = "import threading\nthreading.Thread(target=f).start()\nsys.stdout.write('x')\ntime.sleep(1)\nos.write(1, b'')\n"
    assert {name for name, pattern in FORBIDDEN_TEXT.items() if pattern.search(sample)} == {
        "threading.Thread", "sys.stdout", "time.sleep", "os.write"
    }
    assert not FORBIDDEN_TEXT["print("].search("self.print_schema(x)")
    assert FORBIDDEN_TEXT["print("].search("    print(x)")


def test_executing_requests_starts_no_thread_and_writes_nothing(capfd: pytest.CaptureFixture[str]) -> None:
    from mcpsync.cli.demo import build_demo_service

    before = set(threading.enumerate())
    h = EngineHarness([build_demo_service()])
    h.ok(h.initialize())
    h.ok(h.request("tools/list"))
    h.ok(h.request("tools/call", {"name": "countdown", "arguments": {"steps": 2, "delay": 0}, "_meta": {"progressToken": 1}}))
    h.ok(h.request("prompts/get", {"name": "review_code", "arguments": {"code": "x"}}))
    h.ok(h.request("resources/read", {"uri": "demo://greeting/Ada"}))
    fresh = EngineHarness([build_demo_service()])
    fresh.ok(fresh.modern("server/discover"))
    fresh.ok(fresh.modern("tools/call", {"name": "echo", "arguments": {"text": "hi"}}))
    assert set(threading.enumerate()) == before
    out, err = capfd.readouterr()
    assert out == "" and err == ""
