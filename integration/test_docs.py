"""The documentation cannot rot: it builds without a warning, and every example it shows runs.

Every example in docs/ is a file in docs/examples/, included into its page with ``literalinclude``:

- ``NAME.py`` with ``NAME.out`` beside it is run (``python NAME.py``, in a copy of docs/examples) and
  what it prints, stdout and stderr together as a terminal shows them, must be ``NAME.out``;
- ``NAME.console`` is a shell session: ``$ COMMAND`` lines, each followed by what it prints. The test
  replays it without a shell. A command is ``mcpsync``, ``python``, ``gunicorn`` or ``curl`` with its
  arguments (split as a shell would), optionally fed by ``echo ARG`` or ``printf '%s\\n' ARGS...``
  through ``|``, optionally followed by ``; echo "exit $?"`` (the exit status is then part of the
  output; otherwise it must be 0) or by ``&`` (started in the background: the lines shown under it
  are waited for, in order, among what it prints, and it gets SIGTERM when the session ends);
- ``NAME.wire`` is a conversation with a server over stdio: its first line, ``$ COMMAND``, starts the
  server; each ``→`` line is written to it as it is, and each ``←`` line must be the next line it
  writes (``...`` standing for what the page leaves out). A ``→`` line's ``requestState``, which the
  page abbreviates, is sent as the one the server last returned, as a client echoes it;
- any other file (a server the examples start, a config file) must be used by some example.

Outputs are compared after normalising what changes from run to run (ports, clock times, log
timestamps, durations); ``...`` in an expected line stands for any text. The pages say
``127.0.0.1:8000`` (and ``127.0.0.1:9000`` for a second server, such as the toy authorization server
of the login page); each run replaces each with a free port, in the commands and in the files.

Every example runs as a user would run it on a fresh account, never touching the real one:
``XDG_CONFIG_HOME`` is a new empty folder for each example (so ``mcpsync login`` and ``OAuth()``
keep their tokens there, not in ``~/.config``, and one example never sees another's login), and
``BROWSER`` is ``integration/fixtures/browser_standin.py``, which ``webbrowser`` starts with the
authorization URL and which follows the redirect as a user who approves the login would.
"""

from __future__ import annotations

import json
import os
import queue
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import threading
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests._timeouts import LONG

REPO_ROOT = Path(__file__).resolve().parent.parent
DOCS = REPO_ROOT / "docs"
EXAMPLES = DOCS / "examples"
README = REPO_ROOT / "README.rst"
SHOWN_PORTS = ("127.0.0.1:8000", "127.0.0.1:9000")
BROWSER_STANDIN = REPO_ROOT / "integration" / "fixtures" / "browser_standin.py"

# A session whose lines may come in any order: notes.console pipes three requests into a server that
# runs them concurrently, and the page says so ("match them by id").
UNORDERED = {"notes.console"}

# Examples that fail because of a bug in mcpsync, not in the page. Strict: once the bug is fixed the
# test fails until the entry goes. notes.py's Stats has `longest: str | None`, whose output schema
# property is {"type": ["string", "null"]}; catalog/validation.py's _compile_fast_check tests
# `prop.get("type") not in _EXACT_TYPES` and a list is unhashable, so registering any tool whose
# schema is flat with such a property raises TypeError.
KNOWN_BROKEN: dict[str, str] = {}  # example -> why it fails today (xfail, strict: fixing it fails the test)

# The shell blocks a page may still show as text: commands that install or start things and print
# nothing to compare. A block with a "$ " prompt shows output, so it must be a .console file.
PROMPT = re.compile(r"^\s*\$ ", re.MULTILINE)


def _pages() -> list[Path]:
    return sorted(path for path in DOCS.rglob("*.rst") if EXAMPLES not in path.parents)


def _example_files() -> list[Path]:
    return sorted(path for path in EXAMPLES.iterdir() if path.is_file() and not path.name.startswith("."))


def _runnable() -> list[str]:
    return [path.name for path in _example_files()
            if path.suffix in {".console", ".wire"} or (path.suffix == ".py" and path.with_suffix(".out").exists())]


# -- (1) the build ----------------------------------------------------------------------------------

@pytest.mark.timeout(150)
def test_the_docs_build_without_a_warning(tmp_path: Path) -> None:
    """Nitpicky too: every cross-reference, to a page, a section, an option or an API name, resolves."""
    args = [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-n", "-q", "-b", "html",
            "-d", str(tmp_path / "doctrees"), str(DOCS), str(tmp_path / "html")]
    try:
        done = subprocess.run(args, check=False, cwd=REPO_ROOT, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              timeout=120, env=_env())
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"sphinx-build took over 120 s:\n{exc.stdout}\n{exc.stderr}", pytrace=False)
    assert done.returncode == 0, f"sphinx-build failed ({done.returncode}):\n{done.stdout}\n{done.stderr}"
    assert (tmp_path / "html" / "cli.html").exists()


# -- (3) nothing rots unseen ------------------------------------------------------------------------

def _included() -> set[Path]:
    included = set()
    for page in _pages():
        for target in re.findall(r"^\s*\.\. literalinclude:: (\S+)", _without_code_blocks(page.read_text()), re.MULTILINE):
            base = DOCS if target.startswith("/") else page.parent
            included.add((base / target.lstrip("/")).resolve())
    return included


def test_every_example_file_is_shown_by_some_page() -> None:
    missing = [path.name for path in _example_files() if path.resolve() not in _included()]
    assert not missing, f"files in docs/examples that no page literalincludes: {missing}"


def test_every_included_file_exists() -> None:
    absent = sorted(str(path) for path in _included() if not path.exists())
    assert not absent, f"pages literalinclude files that do not exist: {absent}"


def test_every_example_has_an_expected_output_and_every_helper_a_user() -> None:
    files = _example_files()
    texts = {path.name: path.read_text() for path in files}
    problems = []
    for path in files:
        if path.suffix == ".out" and not path.with_suffix(".py").exists():
            problems.append(f"{path.name}: no {path.stem}.py to produce it")
        if path.suffix in {".console", ".wire", ".out"} or path.with_suffix(".out").exists():
            continue
        # A helper: a server or config file that some example starts or reads.
        uses = [path.name, f"{path.stem}:", f"from {path.stem} import"] if path.suffix == ".py" else [path.name]
        if not any(use in text for name, text in texts.items() if name != path.name for use in uses):
            problems.append(f"{path.name}: neither an example (no {path.stem}.out) nor used by one")
    assert not problems, "\n".join(problems)


def test_no_page_shows_code_that_is_not_a_tested_file() -> None:
    problems = []
    for page in _pages():
        text = page.read_text()
        for language, body in _code_blocks(text):
            where = page.relative_to(REPO_ROOT)
            if language in {"python", "py", "pycon", "console"}:
                problems.append(f"{where}: a '{language}' code block; make it a file in docs/examples")
            elif language in {"sh", "shell", "bash"} and PROMPT.search(body):
                problems.append(f"{where}: a shell session with output; make it a .console file:\n{body}")
    assert not problems, "\n".join(problems)


def test_the_readme_and_the_quick_start_say_the_same_set_up() -> None:
    """The README is the door and the quick start its page in the docs: what the test command needs
    from the machine, and does about it, is said once in words both carry."""
    def set_up(text: str) -> str:
        start = text.index("``scripts/test`` creates ``.venv``")
        return " ".join(text[start:text.index("A run that collects no tests fails.", start)].split())

    assert set_up(README.read_text()) == set_up((DOCS / "quickstart.rst").read_text())


FILES_OF_OTHERS = {
    "NAME.py", "docs/examples/NAME.py",  # docs/dev/docs.rst: a placeholder for an example's name
    "transport_security.py", "mcpserver/resolve.py",  # the official SDKs' sources, cited by name
    "claude_desktop_config.json", ".mcp.json",  # a user's own client configurations
}
"""Files a page may name that are not the repository's: everything else it names, a reader of the
repository must be able to open."""


def test_every_file_a_page_names_is_in_the_repository() -> None:
    """A page that cites a file the repository does not carry (a private wire digest, a folder made
    only on the developers' machines) points its reader at nothing."""
    tracked = subprocess.run(["git", "ls-files"], cwd=REPO_ROOT, capture_output=True, text=True, timeout=60, check=True).stdout.split()
    known = set(tracked) | {Path(name).name for name in tracked} | FILES_OF_OTHERS
    cited = re.compile(r"``([\w./-]+\.(?:md|rst|py|toml|json|txt|cfg|conf|sh))``")
    problems = [f"{page.relative_to(REPO_ROOT)}: {name}"
                for page in [*_pages(), README] for name in cited.findall(page.read_text())
                if name not in known and Path(name).name not in known]
    assert not problems, "pages name files the repository does not have:\n" + "\n".join(problems)


def test_the_readme_shows_only_tested_examples() -> None:
    """GitHub renders README.rst without Sphinx, so it cannot literalinclude: each of its code blocks,
    but the shell one-liners, must be a copy of a file in docs/examples, which the tests run."""
    files = {path.read_text().rstrip("\n"): path.name for path in _example_files()}
    problems = []
    for language, body in _code_blocks(README.read_text()):
        if language in {"sh", "shell", "bash"} and not PROMPT.search(body):
            continue
        if body.rstrip("\n") not in files:
            problems.append(f"a '{language}' block that is no file of docs/examples:\n{body}")
    assert not problems, "\n".join(problems)


def test_the_package_layout_names_every_module_and_only_modules() -> None:
    """docs/dev/layout.rst lists the package's files; a module added or removed must show there."""
    listed = set(re.findall(r"^ {5}([\w/]+\.py)\b", (DOCS / "dev" / "layout.rst").read_text(), re.MULTILINE))
    package = REPO_ROOT / "mcpsync"
    files = {str(path.relative_to(package)) for path in package.rglob("*.py")
             if path.name != "__init__.py" or path.parent.name in {"mcpsync", "client"}}
    assert files - listed == set(), f"modules docs/dev/layout.rst does not list: {sorted(files - listed)}"
    assert listed - files == set(), f"docs/dev/layout.rst lists files that do not exist: {sorted(listed - files)}"


def test_the_api_reference_documents_every_exported_name() -> None:
    """A name added to mcpsync.__all__ (or to mcpsync.client) must get its entry in docs/api.rst."""
    import mcpsync
    import mcpsync.client

    documented = set(re.findall(r"^\.\. (?:auto\w+|data|function|class)::\s*([\w.]+)", (DOCS / "api.rst").read_text(), re.MULTILINE))
    exported = {f"mcpsync.{name}" for name in mcpsync.__all__}
    client = {name for name, value in vars(mcpsync.client).items()
              if not name.startswith("_") and getattr(value, "__module__", "").startswith("mcpsync.client")}
    missing = sorted(exported - documented)
    missing += sorted(name for name in client if f"mcpsync.{name}" not in documented and f"mcpsync.client.{name}" not in documented)
    assert not missing, f"exported but not in docs/api.rst: {missing}"


def _without_code_blocks(text: str) -> str:
    """``text`` with the bodies of its code blocks blanked (a page may show a directive as code)."""
    lines = text.split("\n")
    keep = []
    inside: int | None = None
    for line in lines:
        if inside is not None and (not line.strip() or len(line) - len(line.lstrip()) > inside):
            keep.append("")
            continue
        inside = None
        match = re.match(r"^(\s*)\.\. code-block::", line)
        if match:
            inside = len(match.group(1))
        keep.append(line)
    return "\n".join(keep)


def _code_blocks(text: str) -> list[tuple[str, str]]:
    """The (language, dedented body) of each code-block directive and :: literal block of ``text``."""
    blocks = []
    lines = text.split("\n")
    for number, line in enumerate(lines):
        match = re.match(r"^(\s*)\.\. code-block::\s*(\S*)", line)
        if not match:
            continue
        body = []
        indent = len(match.group(1))
        for following in lines[number + 1:]:
            if following.strip() and len(following) - len(following.lstrip()) <= indent:
                break
            body.append(following)
        content = [item for item in body if not item.strip().startswith(":")] if body else []
        blocks.append((match.group(2), textwrap.dedent("\n".join(content)).strip("\n") + "\n"))
    return blocks


# -- (2) every example runs and prints what the page shows ------------------------------------------

NORMALISE = [
    (re.compile(r"\b\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}\b"), "<timestamp>"),
    (re.compile(r"\b\d\d:\d\d:\d\d\b"), "<time>"),
    (re.compile(r"\b(127\.0\.0\.1|localhost):\d+\b"), r"\1:<port>"),
    (re.compile(r"\b\d+(\.\d+)? ms\b"), "<n> ms"),
]


def _normalise(text: str, workdir: Path) -> list[str]:
    text = text.replace(str(workdir), "<examples>")
    for pattern, replacement in NORMALISE:
        text = pattern.sub(replacement, text)
    lines = [line.rstrip() for line in text.split("\n")]
    while lines and not lines[-1]:
        lines.pop()
    return lines


def _matches(expected: str, actual: str) -> bool:
    if "..." not in expected:
        return expected == actual
    return re.fullmatch(".*".join(re.escape(part) for part in expected.split("...")), actual) is not None


def _compare(expected: list[str], actual: list[str], *, ordered: bool = True) -> bool:
    if not ordered:
        expected, actual = sorted(expected), sorted(actual)
    return len(expected) == len(actual) and all(_matches(e, a) for e, a in zip(expected, actual))


def _env(config_home: Path | None = None) -> dict[str, str]:
    """The environment of the build and of every example; an example's has its own `config_home`
    as XDG_CONFIG_HOME and the browser stand-in as BROWSER (see the module docstring)."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("MCPSYNC_")}
    if config_home is not None:
        env["XDG_CONFIG_HOME"] = str(config_home)
        env["BROWSER"] = f"{shlex.quote(sys.executable)} {shlex.quote(str(BROWSER_STANDIN))} %s"
    # `mcpsync` inside a command (`-- mcpsync serve`, a config's command) is this interpreter's.
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env["PYTHONPATH"] = os.pathsep.join([str(REPO_ROOT), *filter(None, [env.get("PYTHONPATH")])])
    env["PYTHONUNBUFFERED"] = "1"  # stdout and stderr interleave as on a terminal
    env.pop("PYTHONWARNINGS", None)
    return env


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@dataclass
class Workdir:
    """A copy of docs/examples whose shown ports are free ones, and the example's own config folder."""

    path: Path
    addresses: dict[str, str]
    env: dict[str, str]

    def localise(self, text: str) -> str:
        for shown, address in self.addresses.items():
            text = text.replace(shown, address)
        return text


@pytest.fixture
def workdir(tmp_path: Path) -> Workdir:
    """A copy of docs/examples whose 127.0.0.1:8000 and 127.0.0.1:9000 are free ports."""
    addresses: dict[str, str] = {}
    for shown in SHOWN_PORTS:
        while (address := f"127.0.0.1:{_free_port()}") in addresses.values():
            pass
        addresses[shown] = address
    config_home = tmp_path / "config"
    config_home.mkdir()
    work = Workdir(tmp_path / "examples", addresses, _env(config_home))
    work.path.mkdir()
    for path in _example_files():
        (work.path / path.name).write_text(work.localise(path.read_text()))
    return work


def _program(name: str) -> list[str]:
    if name == "mcpsync":
        return [sys.executable, "-m", "mcpsync"]
    if name == "python":
        return [sys.executable]
    if name == "gunicorn":
        return [sys.executable, "-m", "gunicorn"]
    if name == "curl":
        found = shutil.which("curl")
        assert found, "curl is not installed, and a session runs it (Debian: apt-get install curl)"
        return [found]
    raise AssertionError(f"a session runs {name!r}: only mcpsync, python, gunicorn and curl are known")


@dataclass
class Step:
    command: str
    expected: list[str]
    background: bool = False
    show_exit: bool = False
    stdin: str | None = None
    argv: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)  # a command's own `NAME=value` prefixes


def _parse_session(text: str) -> list[tuple[str, list[str]]]:
    """Each command of a session (continuation lines joined) and the lines shown under it."""
    lines = text.rstrip("\n").split("\n")
    steps: list[tuple[str, list[str]]] = []
    number = 0
    while number < len(lines):
        line = lines[number]
        assert line.startswith("$ "), f"line {number + 1}: a session's first line and every command start with '$ '"
        command = line[2:]
        while command.endswith("\\"):
            number += 1
            command = command[:-1].rstrip() + " " + lines[number].strip()
        number += 1
        expected = []
        while number < len(lines) and not lines[number].startswith("$ "):
            expected.append(lines[number])
            number += 1
        steps.append((command, expected))
    return steps


ENV_ASSIGNMENT = re.compile(r"[A-Z_][A-Z0-9_]*=.*")
"""A shell's `NAME=value` before a command: that command's environment."""


def _parse_command(command: str, expected: list[str]) -> Step:
    step = Step(command, expected)
    if command.endswith(" &"):
        step.background, command = True, command[:-2]
    if command.endswith('; echo "exit $?"'):
        step.show_exit, command = True, command[: -len('; echo "exit $?"')]
    lexer = shlex.shlex(command, posix=True, punctuation_chars="|")
    lexer.whitespace_split = True
    tokens = list(lexer)
    if "|" in tokens:
        at = tokens.index("|")
        feeder, tokens = tokens[:at], tokens[at + 1:]
        if feeder[0] == "echo":
            step.stdin = " ".join(feeder[1:]) + "\n"
        elif feeder[0] == "printf" and feeder[1] == "%s\\n":
            step.stdin = "".join(argument + "\n" for argument in feeder[2:])
        else:
            raise AssertionError(f"only echo and printf '%s\\n' may feed a command: {command}")
    assert "|" not in tokens, f"one pipe at most: {command}"
    while tokens and ENV_ASSIGNMENT.fullmatch(tokens[0]):
        name, _, value = tokens.pop(0).partition("=")
        step.env[name] = value
    step.argv = _program(tokens[0]) + tokens[1:]
    return step


class Background:
    """A command left running while the session goes on; its output is read by a thread."""

    def __init__(self, step: Step, cwd: Path, env: dict[str, str]) -> None:
        self.step = step
        self.proc = subprocess.Popen(step.argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True, start_new_session=True)
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.seen: list[str] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def wait_for(self, expected: list[str], workdir: Path) -> None:
        """Read what it prints until each expected line has come, in order (others may come between)."""
        wanted = [line for line in _normalise("\n".join(expected), workdir) if line]
        while wanted:
            try:
                line = self.lines.get(timeout=LONG * 2)
            except queue.Empty:
                line = None
            if line is None:
                pytest.fail(f"`{self.step.command}` never printed {wanted[0]!r}; it printed:\n" + "\n".join(self.seen),
                            pytrace=False)
            self.seen.append(line)
            normalised = _normalise(line, workdir)
            if normalised and _matches(wanted[0], normalised[0]):
                wanted.pop(0)

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=LONG)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=LONG)
            pytest.fail(f"`{self.step.command}` did not stop on SIGTERM", pytrace=False)
        finally:
            self.reader.join(timeout=LONG)


def _run(argv: list[str], cwd: Path, env: dict[str, str], stdin: str | None, what: str) -> tuple[int, str]:
    proc = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        output, _ = proc.communicate(stdin, timeout=LONG * 3)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        output, _ = proc.communicate()
        pytest.fail(f"{what} did not finish within {LONG * 3} s; it printed:\n{output}", pytrace=False)
    return proc.returncode, output


def _diff(what: str, expected: list[str], actual: list[str]) -> str:
    return f"{what}\n--- the page shows ---\n" + "\n".join(expected) + "\n--- it printed ---\n" + "\n".join(actual)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("name", [
    pytest.param(name, marks=pytest.mark.xfail(reason=KNOWN_BROKEN[name], strict=True)) if name in KNOWN_BROKEN else name
    for name in _runnable()
])
def test_the_example_prints_what_the_page_shows(name: str, workdir: Workdir) -> None:
    cwd, env = workdir.path, workdir.env
    if name.endswith(".py"):
        returncode, output = _run([sys.executable, name], cwd, env, None, name)
        expected = _normalise((EXAMPLES / name).with_suffix(".out").read_text(), cwd)
        actual = _normalise(output, cwd)
        assert returncode == 0, _diff(f"{name} exited {returncode}", expected, actual)
        assert _compare(expected, actual), _diff(name, expected, actual)
        return
    if name.endswith(".wire"):
        _converse((EXAMPLES / name).read_text(), cwd, env)
        return
    running: list[Background] = []
    try:
        for command, shown in _parse_session((EXAMPLES / name).read_text()):
            step = _parse_command(workdir.localise(command), shown)
            if step.background:
                running.append(Background(step, cwd, env | step.env))
                running[-1].wait_for(step.expected, cwd)
                continue
            returncode, output = _run(step.argv, cwd, env | step.env, step.stdin, f"`{step.command}`")
            if step.show_exit:
                output = output + ("" if output.endswith("\n") or not output else "\n") + f"exit {returncode}\n"
            expected, actual = _normalise("\n".join(step.expected), cwd), _normalise(output, cwd)
            assert step.show_exit or returncode == 0, _diff(f"`{step.command}` exited {returncode}", expected, actual)
            assert _compare(expected, actual, ordered=name not in UNORDERED), _diff(f"$ {step.command}", expected, actual)
    finally:
        for background in reversed(running):
            background.stop()


def _converse(text: str, cwd: Path, env: dict[str, str]) -> None:
    """Replay a .wire file: write each → line to the server, read each ← line from it."""
    first, *lines = text.rstrip("\n").split("\n")
    assert first.startswith("$ "), "a .wire file starts with the '$ COMMAND' of its server"
    step = _parse_command(first[2:], [])
    proc = subprocess.Popen(step.argv, cwd=cwd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    assert proc.stdin is not None and proc.stdout is not None
    received: queue.Queue[str | None] = queue.Queue()

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            received.put(line.rstrip("\n"))
        received.put(None)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    seen: list[str] = []
    state: str | None = None
    try:
        for line in lines:
            arrow, _, message = line.partition(" ")
            if arrow == "→":
                if '"requestState":' in message:
                    sent = json.loads(message)
                    assert state is not None, f"no requestState came before: {line}"
                    sent["params"]["requestState"] = state
                    message = json.dumps(sent, separators=(",", ":"), ensure_ascii=False)
                proc.stdin.write(message + "\n")
                proc.stdin.flush()
                seen.append(line)
                continue
            assert arrow == "←", f"a .wire line starts with → or ←: {line!r}"
            try:
                got = received.get(timeout=LONG)
            except queue.Empty:
                got = None
            assert got is not None, "\n".join([*seen, f"expected: {line}", "but the server wrote nothing more"])
            seen.append(f"← {got}")
            assert _matches(message, got), "\n".join([*seen[:-1], f"expected: {line}", f"got:      ← {got}"])
            result = json.loads(got).get("result")
            if isinstance(result, dict) and isinstance(result.get("requestState"), str):
                state = result["requestState"]
        proc.stdin.close()
        assert proc.wait(timeout=LONG) == 0, proc.stderr.read() if proc.stderr else ""
        assert received.get(timeout=LONG) is None, "the server wrote more than the page shows"
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=LONG)
        reader.join(timeout=LONG)
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            if stream is not None and not stream.closed:
                stream.close()
