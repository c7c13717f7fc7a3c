"""`mcpsync serve TARGET` when the user's own code raises while it is imported (or its factory
called): the error says where, in the user's frames, as a real `mcpsync serve` child shows it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from .._timeouts import LONG
from ._serving import serve_env


def serve(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mcpsync", "serve", *args],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env=serve_env(),
        cwd=cwd,
        timeout=LONG,
    )


def test_an_import_that_raises_shows_the_users_frames_with_file_line_and_source(tmp_path: Path) -> None:
    (tmp_path / "settings.py").write_text('CONFIG: dict[str, str] = {}\n\n\ndef lookup():\n    return CONFIG["missing"]\n')
    (tmp_path / "app.py").write_text("from settings import lookup\n\nVALUE = lookup()\n")
    result = serve("app.py", "--log-level", "debug", cwd=tmp_path)
    assert result.returncode == 1 and result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert lines[0] == "Error: importing app.py failed: KeyError: 'missing'", result.stderr
    assert lines[1:5] == [
        f'  File "{tmp_path / "app.py"}", line 3, in <module>',
        "    VALUE = lookup()",
        f'  File "{tmp_path / "settings.py"}", line 5, in lookup',
        '    return CONFIG["missing"]',
    ], result.stderr
    assert "mcpsync" not in "\n".join(lines[1:]), "the loader's own frames are left out"
    assert "<frozen" not in result.stderr and "Traceback" not in result.stderr


def test_a_module_importing_one_that_raises_shows_both_frames_not_importlibs(tmp_path: Path) -> None:
    (tmp_path / "helper.py").write_text("raise RuntimeError('no database')\n")
    (tmp_path / "app.py").write_text("import helper\n")
    result = serve("app.py", cwd=tmp_path)
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        "Error: importing app.py failed: RuntimeError: no database",
        f'  File "{tmp_path / "app.py"}", line 1, in <module>',
        "    import helper",
        f'  File "{tmp_path / "helper.py"}", line 1, in <module>',
        "    raise RuntimeError('no database')",
    ]


def test_a_syntax_error_shows_the_line_and_where_in_it(tmp_path: Path) -> None:
    (tmp_path / "app.py").write_text("from mcpsync import Service\n\nservice = Service('app'\n")
    result = serve("app.py", cwd=tmp_path)
    assert result.returncode == 1
    lines = result.stderr.splitlines()
    assert lines[0].startswith("Error: importing app.py failed: SyntaxError: "), result.stderr
    assert f'  File "{tmp_path / "app.py"}", line 3' in lines
    assert "    service = Service('app'" in lines


def test_a_factory_that_raises_shows_its_frame(tmp_path: Path) -> None:
    (tmp_path / "app.py").write_text("def make():\n    raise ValueError('no config')\n")
    result = serve("app.py:make", cwd=tmp_path)
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        "Error: app.py:make: calling make() failed: ValueError: no config",
        f'  File "{tmp_path / "app.py"}", line 2, in make',
        "    raise ValueError('no config')",
    ]


def test_a_deep_recursion_shows_only_the_innermost_frames(tmp_path: Path) -> None:
    (tmp_path / "app.py").write_text("def down(n):\n    return down(n + 1)\n\n\ndown(0)\n")
    result = serve("app.py", cwd=tmp_path)
    assert result.returncode == 1
    lines = result.stderr.splitlines()
    assert lines[0].startswith("Error: importing app.py failed: RecursionError: "), lines[0]
    assert lines[1].startswith("  ... ") and lines[1].endswith(" outer frames left out"), lines[1]
    assert len(lines) == 2 + 2 * 12, len(lines)


def test_a_module_that_is_not_there_is_one_line(tmp_path: Path) -> None:
    result = serve("no_such_module_here", cwd=tmp_path)
    assert result.returncode == 1
    assert result.stderr == "Error: cannot import no_such_module_here: No module named 'no_such_module_here'\n"
