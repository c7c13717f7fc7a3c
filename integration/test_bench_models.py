"""scripts/bench-models, the cost of a pydantic model argument against a dataclass one, run as a real
process: a quick run exits 0 and prints both rows and the ratio (its own check that both tools
answer the same total ran first)."""

from __future__ import annotations

import re
import sys
from typing import Any

import pytest
from wire import REPO_ROOT, base_env

pytestmark = pytest.mark.timeout(120)


def test_a_quick_run_prints_both_rows_and_the_ratio(bounded: Any) -> None:
    done = bounded([sys.executable, str(REPO_ROOT / "scripts" / "bench-models"), "--calls", "50", "--rounds", "2"],
                   timeout=90, env=base_env(), cwd=REPO_ROOT)
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    lines = done.stdout.splitlines()
    assert any(re.fullmatch(r"\| pydantic model \| \d+\.\d \|", line) for line in lines), done.stdout
    assert any(re.fullmatch(r"\| dataclass \| \d+\.\d \|", line) for line in lines), done.stdout
    assert re.search(r"^model / dataclass: \d+\.\d\dx$", done.stdout, re.MULTILINE), done.stdout
