"""Sphinx configuration of mcpsync's documentation.

Build it with warnings as errors (what tests/test_docs.py runs):

    .venv/bin/python -m sphinx -W --keep-going -n -b html docs BUILD

Every example the pages show is a file in docs/examples/, included with literalinclude and run by
tests/test_docs.py, which compares what it prints with the .out file shown under it.
"""

from __future__ import annotations

import os
import re
import sys

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..")))

import mcpsync

project = "mcpsync"
author = "the mcpsync developers"
copyright = "the mcpsync developers"
release = version = mcpsync.__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx_click",
]

root_doc = "index"
exclude_patterns = ["_build", "examples"]
templates_path: list[str] = []
default_role = "code"  # docstrings write `name` for code, as Markdown does
highlight_language = "none"
# Commands in the CLI reference's examples must stay copyable: no curly quotes, no "--" turned into a dash.
smartquotes = False
pygments_style = "sphinx"

html_theme = "alabaster"  # built into Sphinx: no theme package to pin
html_theme_options = {"description": "MCP for blocking Python", "fixed_sidebar": True}
html_static_path: list[str] = []
html_show_sourcelink = False

autodoc_member_order = "bysource"
autodoc_typehints = "signature"
autodoc_typehints_format = "short"
autodoc_preserve_defaults = False  # show a default's value, not the constant's name

# Nitpicky (-n): every cross-reference must resolve. The build has no network, so intersphinx cannot
# fetch Python's inventory; these standard-library and third-party types are left unlinked instead.
nitpicky = True
nitpick_ignore_regex = [
    ("py:class", r"(collections\.abc|typing|os|io|subprocess|threading|concurrent\.futures|enum|types|socket|http\.client|ssl|datetime|pathlib)\..*"),
    ("py:class", r"(IO|Sequence|Mapping|Iterable|Iterator|Callable|Collection|PathLike|Event|Thread|Enum|IntEnum|Future)(\[.*\])?"),
    ("py:class", r"click\..*"),
]
# Internal types that public signatures name (a Call's request and session, an interceptor's outcome,
# the stdio wire, the frames a connection reads). They are not part of the API, so the reference does
# not document them: their names show unlinked.
nitpick_ignore_regex += [
    ("py:class", (r"(mcpsync\.[\w.]+\.)?(Request|Notification|Response|Invalid|Session|Envelope|TransportInfo|Outcome"
                  r"|Engine|Exchange|FdTransport|WsgiApp|StdioWire|StdioServer|CancelSignal|_FunctionResource|Connector|RemoteOptions|ClientRoots|Watchdog|TaskStarted|TaskControl|Body)")),
]
# Type variables (F = TypeVar("F", ...) for the decorators) have nothing to link to.
nitpick_ignore_regex += [("py:class", r"(mcpsync\.[\w.]+\.)?_?[A-Z]")]


# -- Docstrings -------------------------------------------------------------------------------------
# They are Google style (Args:, Returns:), converted by napoleon's GoogleDocstring. Not through the
# napoleon extension itself: it reads an attribute's docstring as "type: description", and mcpsync's
# attribute docstrings are prose that may hold a colon ("... by key (2026-07-28: sealed ...)").

from sphinx.ext.napoleon import Config as _NapoleonConfig
from sphinx.ext.napoleon.docstring import GoogleDocstring

_napoleon = _NapoleonConfig(napoleon_use_rtype=False, napoleon_use_param=True, napoleon_use_ivar=True)


def _google_docstring(app, what, name, obj, options, lines):  # type: ignore[no-untyped-def]
    if what in ("attribute", "data", "property"):
        return
    lines[:] = GoogleDocstring(lines, _napoleon, app, what, name, obj, options).lines()


# -- The command line reference ---------------------------------------------------------------------
# sphinx-click passes the options' help text through as reStructuredText; a lone "*" in it ("or *")
# means "anything" there, not the start of emphasis.

_LONE_STAR = re.compile(r"(?<![\\*\w])\*(?![\w*])")


def _escape_stars(app, ctx, lines):  # type: ignore[no-untyped-def]
    lines[:] = [_LONE_STAR.sub(r"\\*", line) for line in lines]


# -- Short names in signatures ---------------------------------------------------------------------
# An annotation written as a bare name ("RemoteSource", imported only for type checking) reaches
# Sphinx unqualified; resolve it to the one documented mcpsync object of that name.

def _resolve_short_name(app, env, node, contnode):  # type: ignore[no-untyped-def]
    if node.get("refdomain") != "py" or node.get("reftype") not in ("class", "exc", "obj"):
        return None
    target = node.get("reftarget", "")
    if "." in target and not target.startswith("mcpsync."):
        return None
    short = target.rsplit(".", 1)[-1]
    domain = env.get_domain("py")
    found = {name for name, entry in domain.objects.items()
             if name.rsplit(".", 1)[-1] == short and entry.objtype in ("class", "exception") and not entry.aliased}
    if len(found) != 1:
        return None
    return domain.resolve_xref(env, node["refdoc"], app.builder, "class", found.pop(), node, contnode)


# -- Names imported only for type checking -----------------------------------------------------------
# A module that names a type in its signatures but imports it under `if TYPE_CHECKING:` (so that
# importing mcpsync loads no credentials code) gives autodoc an annotation it cannot evaluate, and
# then autodoc leaves every annotation of that signature a bare string (connect's `Handler` too,
# otherwise shown as the Callable it is). Before a signature is read, these names are put in its
# module's namespace, as the type checker sees them. (autodoc_type_aliases would do it, but
# Sphinx 9 cannot render such an alias inside `X | None`.)

_TYPE_CHECKING_NAMES = {"HttpCredentials": "mcpsync.auth.client.credentials"}


def _type_checking_names(app, obj, bound_method):  # type: ignore[no-untyped-def]
    namespace = getattr(getattr(obj, "__init__", obj) if isinstance(obj, type) else obj, "__globals__", None)
    if not isinstance(namespace, dict) or not str(namespace.get("__name__", "")).startswith("mcpsync"):
        return
    import importlib

    for name, module in _TYPE_CHECKING_NAMES.items():
        if name not in namespace:
            namespace[name] = getattr(importlib.import_module(module), name)


def _parseable_defaults(app, what, name, obj, options, signature, return_annotation):  # type: ignore[no-untyped-def]
    """A dataclass field's default_factory shows as `=<factory>`, which no Python signature parses."""
    if signature and "<factory>" in signature:
        return signature.replace("<factory>", "..."), return_annotation
    return None


def setup(app):  # type: ignore[no-untyped-def]
    app.connect("autodoc-before-process-signature", _type_checking_names)
    app.connect("autodoc-process-signature", _parseable_defaults)
    app.connect("missing-reference", _resolve_short_name)
    app.connect("autodoc-process-docstring", _google_docstring)
    app.connect("sphinx-click-process-options", _escape_stars)
    app.connect("sphinx-click-process-description", _escape_stars)
