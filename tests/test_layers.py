"""No module imports another package's private module.

A `_private` module is its package's business: the package may change it at will. When another
layer needs a name from one, the name is made public in its module, or the module moves to where
both may import it (the client and the server both frame stdio, so framing is in `protocol/`).
Private modules at the package root (`mcpsync._futures`, `mcpsync._version`) are shared by every
layer on purpose: the underscore keeps them out of the public API, not out of the subpackages.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "mcpsync"

KNOWN_LEAKS: set[tuple[str, str]] = set()
"""(importing package, private module) pairs still to fix: the list only shrinks."""


def _package_of(path: Path) -> str:
    """The dotted package a source file belongs to (an `__init__.py`: the package itself)."""
    return ".".join(path.relative_to(PACKAGE.parent).parent.parts)


def _imports(path: Path) -> set[str]:
    """The absolute names of the mcpsync modules (and names in them) that `path` imports."""
    package = _package_of(path)
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level:
            base = package.split(".")
            base = base[: len(base) - node.level + 1]
            module = ".".join([*base, node.module] if node.module else base)
            names.add(module)
            names.update(f"{module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return {name for name in names if name.startswith("mcpsync.")}


def _owning_package(parts: list[str], private: int) -> str:
    """The package a private module or name belongs to: `mcpsync.transport` for
    `mcpsync.transport._frames`, `mcpsync.catalog` for `mcpsync.catalog.service._helper`."""
    owner = parts[:private]
    if not (PACKAGE.parent / Path(*owner) / "__init__.py").exists():
        owner = owner[:-1]
    return ".".join(owner)


def _leaks() -> set[tuple[str, str]]:
    found = set()
    for path in PACKAGE.rglob("*.py"):
        importer_package = _package_of(path)
        for name in _imports(path):
            parts = name.split(".")
            private = next((i for i, part in enumerate(parts) if part.startswith("_") and not part.startswith("__")), None)
            if private is None:
                continue
            if _owning_package(parts, private) not in ("mcpsync", importer_package):
                found.add((importer_package, ".".join(parts[: private + 1])))
    return found


def test_no_module_imports_another_packages_private_module() -> None:
    assert _leaks() - KNOWN_LEAKS == set()


def test_the_known_leaks_are_still_there_or_are_struck_off() -> None:
    assert _leaks() >= KNOWN_LEAKS, "a leak was fixed: strike it off KNOWN_LEAKS"


HTTPD_MAY_IMPORT = {"mcpsync.errors", "mcpsync._pool", "mcpsync._loop_turns"}
"""What of mcpsync outside `mcpsync.httpd` the HTTP server may import: the exception family, the
worker pool and the loop's hand-over, none of which knows MCP."""


def test_the_http_server_imports_nothing_of_mcp() -> None:
    """`mcpsync.httpd` is a general HTTP/1.1 server: the MCP endpoint is an application it serves,
    so it names no protocol, engine, transport or server module."""
    outside = set()
    for path in (PACKAGE / "httpd").rglob("*.py"):
        for name in _imports(path):
            if name.startswith("mcpsync.httpd") or name in HTTPD_MAY_IMPORT:
                continue
            if any(name.startswith(allowed + ".") for allowed in HTTPD_MAY_IMPORT):
                continue
            outside.add((str(path.relative_to(PACKAGE)), name))
    assert outside == set()


def _module_of(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def test_no_two_modules_import_each_other_even_through_others() -> None:
    """The house has no circle: no module reaches itself through the modules it imports (any import,
    at the top, in a function or for type checking alone), so each can be read, tested and moved
    after the ones below it. A package's `__init__` counts as a module."""
    modules = {_module_of(path): path for path in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for module, path in modules.items():
        targets = set()
        for name in _imports(path):
            while name and name not in modules:  # `pkg.mod.Name` -> `pkg.mod`
                name = name.rpartition(".")[0]
            if name and name != module and not module.startswith(name + "."):  # a module's own package is not an import of it
                targets.add(name)
        graph[module] = targets
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles: list[list[str]] = []

    def visit(module: str) -> None:  # Tarjan's strongly connected components
        index[module] = low[module] = len(index)
        stack.append(module)
        for target in graph[module]:
            if target not in index:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == module:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    assert circles == []
