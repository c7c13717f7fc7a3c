"""RFC 6570 URI templates, all four levels: expansion (values to a URI) and matching (a URI back to
its values), which is how a `resources/read` finds the template that serves its URI.

Expansion is the RFC's own algorithm (its appendix A): the eight operators (`{x}`, `{+x}`, `{#x}`,
`{.x}`, `{/x}`, `{;x}`, `{?x}`, `{&x}`), several variables in one expression, the prefix modifier
(`{x:3}`) and explode (`{x*}`), with strings, lists and mappings as values.

Matching is not in the RFC (it leaves the inverse to regular expressions). Here it takes time
linear in the URI's length, whatever a client sends, because nothing is ever read twice:

- Every variable but at most one is *bounded*: its text cannot hold the character that ends it
  (the next literal's first character, its operator's separator, or one of `/ ? #`), so it is
  read with a possessive pattern that gives nothing back. The one *unbounded* expression
  (`{+x}`, `{#x}`, or an exploded variable: these may span segments) gets what the bounded parts
  leave: those before it are read from the URI's start, those after it from its end (on the
  reversed URI), so a bounded variable before it is lazy and one after it greedy. Without an
  unbounded expression every part is read from the end (greedy, as a regular expression would).
- So a template with two unbounded expressions, or with two expressions that nothing separates
  (no literal between them and no operator character leading the second), cannot be matched (a
  match would be ambiguous, or slow): it expands, and `check_matchable` says why it cannot match.
  So does one with a literal after a query expression.
- The query (`{?x,y}` and `{&z}`) is read as `name=value` pairs in any order: unknown names are
  ignored, and an exploded variable collects every value of its name.
- Values are percent-decoded; an exploded variable's values come back as a list. A variable
  absent from the URI is absent from the result (it was undefined when the URI was expanded).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from urllib.parse import quote, unquote

__all__ = ["MAX_URI_LENGTH", "UriTemplate", "Value"]

Value = str | Sequence[str] | Mapping[str, str]
"""What a variable expands from: a string, a list of strings, or a mapping of them."""
MAX_URI_LENGTH = 65_536
"""A longer URI matches no template."""

_UNRESERVED = "-._~"
_RESERVED = ":/?#[]@!$&'()*+,;="
_VARNAME = re.compile(r"(?:[A-Za-z0-9_]|%[0-9A-Fa-f]{2})+(?:\.(?:[A-Za-z0-9_]|%[0-9A-Fa-f]{2})+)*")
_VARSPEC = re.compile(r"(?P<name>[^:*]+)(?::(?P<prefix>[0-9]{1,4})|(?P<explode>\*))?")
_PCT = re.compile(r"%[0-9A-Fa-f]{2}")
_ALWAYS_STOP = "/?#"
"""What no bounded variable's text holds: its value's own `/`, `?` and `#` are percent-encoded."""


@dataclass(frozen=True, slots=True)
class _Operator:
    """RFC 6570 appendix A's table: what an operator puts first and between values, whether the
    values are named (and what a named empty value gets), and whether reserved characters pass
    unencoded (U+R)."""

    first: str
    separator: str
    named: bool
    if_empty: str
    reserved: bool


_OPERATORS: dict[str, _Operator] = {
    "": _Operator("", ",", False, "", False),
    "+": _Operator("", ",", False, "", True),
    "#": _Operator("#", ",", False, "", True),
    ".": _Operator(".", ".", False, "", False),
    "/": _Operator("/", "/", False, "", False),
    ";": _Operator(";", ";", True, "", False),
    "?": _Operator("?", "&", True, "=", False),
    "&": _Operator("&", "&", True, "=", False),
}
_QUERY = frozenset("?&")


@dataclass(frozen=True, slots=True)
class _Var:
    name: str
    prefix: int | None
    explode: bool


@dataclass(frozen=True, slots=True)
class _Expression:
    operator: str
    variables: tuple[_Var, ...]

    @property
    def spec(self) -> _Operator:
        return _OPERATORS[self.operator]

    @property
    def unbounded(self) -> bool:
        """Its text may hold `/` or its own separator: reserved expansion, or an exploded list."""
        return self.spec.reserved or any(var.explode for var in self.variables)


class UriTemplate:
    """One RFC 6570 template: `UriTemplate("file:///{+path}{?rev}").expand({"path": "a/b.txt",
    "rev": "3"})` is `file:///a/b.txt?rev=3`, and `match` of that URI gives the values back.

    Raises:
        ValueError: a malformed template (an unclosed `{`, a reserved operator, a bad variable
            name or modifier).
    """

    def __init__(self, template: str) -> None:
        self.template = template
        self._parts = _parse(template)
        self.variables: tuple[str, ...] = tuple(var.name for part in self._parts if isinstance(part, _Expression) for var in part.variables)
        """The names of its variables, in order (none: the template is a fixed URI)."""
        try:
            _check_matchable(template, self._parts)
        except ValueError as exc:
            self._unmatchable: str | None = str(exc)
            self._matcher: _Matcher | None = None
        else:
            self._unmatchable = None
            self._matcher = _Matcher(self._parts)

    def check_matchable(self) -> None:
        """Raises ValueError saying why this template cannot be matched (see the module's
        docstring); a resource template must be."""
        if self._unmatchable is not None:
            raise ValueError(self._unmatchable)

    def __repr__(self) -> str:
        return f"UriTemplate({self.template!r})"

    def expand(self, values: Mapping[str, Value | None]) -> str:
        """The URI for `values`; a variable missing, None or empty is undefined: its part is left out."""
        return "".join(part if isinstance(part, str) else _expand(part, values) for part in self._parts)

    def match(self, uri: str) -> dict[str, str | list[str]] | None:
        """The values `uri` was expanded from, or None if it is none of this template's URIs.

        Raises:
            ValueError: the template cannot be matched (`check_matchable`).
        """
        if self._matcher is None:
            raise ValueError(self._unmatchable)
        if len(uri) > MAX_URI_LENGTH:
            return None
        return self._matcher.match(uri)


# -- parsing ----------------------------------------------------------------------------------------

def _parse(template: str) -> list[str | _Expression]:
    parts: list[str | _Expression] = []
    at = 0
    while at < len(template):
        opening, closing = template.find("{", at), template.find("}", at)
        if closing != -1 and (opening == -1 or closing < opening):
            raise ValueError(f"URI template {template!r}: a '}}' with no '{{' at {closing}")
        if opening == -1:
            parts.append(template[at:])
            break
        if opening > at:
            parts.append(template[at:opening])
        closing = template.find("}", opening)
        if closing == -1:
            raise ValueError(f"URI template {template!r}: the '{{' at {opening} is never closed")
        parts.append(_expression(template, template[opening + 1 : closing]))
        at = closing + 1
    return parts


def _expression(template: str, text: str) -> _Expression:
    if text[:1] in ("=", ",", "!", "@", "|"):
        raise ValueError(f"URI template {template!r}: the operator {text[:1]!r} is reserved by RFC 6570")
    operator = text[:1] if text[:1] in _OPERATORS and text[:1] else ""
    variables = []
    for spec in text[len(operator) :].split(","):
        found = _VARSPEC.fullmatch(spec)
        if found is None or not _VARNAME.fullmatch(found.group("name")):
            raise ValueError(f"URI template {template!r}: {spec!r} is no variable (letters, digits, '_' and '.', then ':N' or '*')")
        prefix = found.group("prefix")
        if prefix is not None and not 0 < int(prefix) < 10_000:
            raise ValueError(f"URI template {template!r}: the prefix of {spec!r} must be 1 to 9999")
        variables.append(_Var(found.group("name"), int(prefix) if prefix else None, found.group("explode") is not None))
    return _Expression(operator, tuple(variables))


def _query_at(parts: list[str | _Expression]) -> int:
    """Where the query expressions begin (the path is what comes before); the length if none."""
    return next((index for index, part in enumerate(parts) if isinstance(part, _Expression) and part.operator in _QUERY), len(parts))


def _check_matchable(template: str, parts: list[str | _Expression]) -> None:
    names = [var.name for part in parts if isinstance(part, _Expression) for var in part.variables]
    if len(set(names)) != len(names):
        raise ValueError(f"URI template {template!r} names a variable twice: which of its values would be the one?")
    query_at = _query_at(parts)
    path, tail = parts[:query_at], parts[query_at:]
    if sum(1 for part in path if isinstance(part, _Expression) and part.unbounded) > 1:
        raise ValueError(f"URI template {template!r}: two parts that may span segments ({{+x}}, {{#x}}, {{x*}}) cannot be told apart")
    for previous, part in itertools.pairwise(path):
        if isinstance(previous, _Expression) and isinstance(part, _Expression) and not part.spec.first:
            raise ValueError(f"URI template {template!r}: two expressions with nothing between them cannot be told apart")
    for index, part in enumerate(tail):
        if isinstance(part, str):
            raise ValueError(f"URI template {template!r}: text after a query expression ({{?x}}) cannot be matched")
        if part.operator == "#" and index != len(tail) - 1:
            raise ValueError(f"URI template {template!r}: only the fragment ({{#x}}) may follow the query, and last")
        if part.operator not in _QUERY and part.operator != "#":
            raise ValueError(f"URI template {template!r}: only {{&x}} and {{#x}} may follow a query expression")
    literal_query = "".join(part for part in path if isinstance(part, str)).rpartition("?")
    if tail and isinstance(tail[0], _Expression) and tail[0].operator == "?" and literal_query[1]:
        raise ValueError(f"URI template {template!r}: a query expression ({{?x}}) after a literal '?' would start a second query")
    if literal_query[1] and "&" in literal_query[2] and tail:
        raise ValueError(f"URI template {template!r}: a literal '&' before {{&x}} hides where the continued query begins")


# -- expansion (RFC 6570 appendix A) ----------------------------------------------------------------

def _encode(text: str, reserved: bool) -> str:
    if not reserved:
        return quote(text, safe=_UNRESERVED)
    pieces, at = [], 0  # U+R: reserved characters pass, and so does a percent-triplet in the value
    for triplet in _PCT.finditer(text):
        pieces.append(quote(text[at : triplet.start()], safe=_UNRESERVED + _RESERVED))
        pieces.append(triplet.group())
        at = triplet.end()
    pieces.append(quote(text[at:], safe=_UNRESERVED + _RESERVED))
    return "".join(pieces)


def _expand(expression: _Expression, values: Mapping[str, Value | None]) -> str:
    spec = expression.spec
    out: list[str] = []
    for var in expression.variables:
        value = values.get(var.name)
        if value is None or (not isinstance(value, str) and len(value) == 0):
            continue  # undefined
        out.append(spec.separator if out else spec.first)
        if isinstance(value, str):
            text = value[: var.prefix] if var.prefix is not None else value
            if spec.named:
                out.append(var.name + (spec.if_empty if text == "" else "="))
            out.append(_encode(text, spec.reserved))
        elif not var.explode:
            if spec.named:
                out.append(var.name + "=")
            items = [item for pair in value.items() for item in pair] if isinstance(value, Mapping) else list(value)
            out.append(",".join(_encode(str(item), spec.reserved) for item in items))
        else:
            pairs = list(value.items()) if isinstance(value, Mapping) else [(var.name if spec.named else None, item) for item in value]
            rendered = []
            for key, item in pairs:
                encoded = _encode(str(item), spec.reserved)
                if key is None:
                    rendered.append(encoded)
                else:
                    name = key if key == var.name else _encode(str(key), spec.reserved)
                    rendered.append(name + (spec.if_empty if encoded == "" and spec.named else "=") + encoded)
            out.append(spec.separator.join(rendered))
    return "".join(out)


# -- matching -------------------------------------------------------------------------------------

class _Matcher:
    """The template as what reads it (see the module's docstring): the fragment and the query
    split off first, then the path before the unbounded expression read forwards, the path after
    it read on the reversed URI, and the unbounded expression given the middle."""

    def __init__(self, parts: list[str | _Expression]) -> None:
        query_at = _query_at(parts)
        path, tail = parts[:query_at], [part for part in parts[query_at:] if isinstance(part, _Expression)]
        self._query = [var for part in tail if part.operator in _QUERY for var in part.variables]
        self._continued = bool(tail) and tail[0].operator == "&"  # `/search?q={q}{&page}`: the query began in a literal
        self._fragment = next((part for part in tail if part.operator == "#"), None)
        middle = next((index for index, part in enumerate(path) if isinstance(part, _Expression) and part.unbounded), None)
        if middle is None:
            self._head = _Path([], reverse=False)
            self._middle: _Expression | None = None
            self._tail = _Path(path, reverse=True)
        else:
            unbounded = path[middle]
            assert isinstance(unbounded, _Expression)
            self._head = _Path(path[:middle], reverse=False)
            self._middle = unbounded
            self._tail = _Path(path[middle + 1 :], reverse=True)

    def match(self, uri: str) -> dict[str, str | list[str]] | None:
        found: dict[str, str | list[str]] = {}
        if self._fragment is not None:
            uri, hashed, fragment = uri.partition("#")
            if hashed:
                found.update(_values(self._fragment, fragment))
        if self._query:
            uri, query = self._split_query(uri)
            found.update(_pairs(self._query, query, "&"))
        head = self._head.read(uri)
        tail = self._tail.read(uri[::-1])
        if head is None or tail is None:
            return None
        (start, before), (length, after) = head, tail
        end = len(uri) - length
        if self._middle is None:
            if start != end:
                return None
        else:
            if end < start:
                return None
            middle = self._read_middle(uri[start:end])
            if middle is None:
                return None
            found.update(middle)
        found.update(before)
        found.update(after)
        return found

    def _split_query(self, uri: str) -> tuple[str, str]:
        """The URI before its query expressions' text, and that text (without its lead)."""
        if not self._continued:
            path, _, query = uri.partition("?")
            return path, query
        at = uri.find("&", uri.find("?") + 1)  # the literal query holds no '&' (checked), nor do its values
        return (uri, "") if at == -1 else (uri[:at], uri[at + 1 :])

    def _read_middle(self, text: str) -> dict[str, str | list[str]] | None:
        assert self._middle is not None
        spec = self._middle.spec
        if not spec.first:
            return _values(self._middle, text) if text else None  # `{+path}` is never empty, as `{path}` is not
        if not text:
            return {}  # undefined: its lead is absent too
        if not text.startswith(spec.first):
            return None
        text = text[len(spec.first) :]
        if spec.named:
            return _pairs(self._middle.variables, text, spec.separator)
        return _values(self._middle, text)


class _Path:
    """Literals and bounded expressions, read by one regular expression of possessive
    quantifiers (nothing is given back once read): on the reversed URI when `reverse`."""

    def __init__(self, parts: list[str | _Expression], *, reverse: bool) -> None:
        self._reverse = reverse
        ordered = parts[::-1] if reverse else parts
        self._groups: dict[str, tuple[_Expression, _Var | None]] = {}
        pieces = []
        for index, part in enumerate(ordered):
            following = ordered[index + 1] if index + 1 < len(ordered) else None
            pieces.append(re.escape(part[::-1] if reverse else part) if isinstance(part, str) else self._pattern(part, following))
        self._regex = re.compile("".join(pieces), re.DOTALL)

    def _pattern(self, expression: _Expression, following: str | _Expression | None) -> str:
        spec = expression.spec
        stops = set(_ALWAYS_STOP) | {spec.separator}
        if isinstance(following, str):
            stops.add(following[-1] if self._reverse else following[0])
        elif following is not None and following.spec.first and not self._reverse:
            stops.add(following.spec.first)
        if spec.first:
            stops.add(spec.first)
        chars = f"[^{re.escape(''.join(sorted(stops)))}]"
        if spec.named:  # `{;x,y}`: the pairs, each led by `;`, read as one
            group = self._group(expression, None)
            return f"(?P<{group}>(?:;{chars}*+)*+)" if not self._reverse else f"(?P<{group}>(?:{chars}*+;)*+)"
        values = []
        for index, var in enumerate(expression.variables):
            group = self._group(expression, var)
            if index == 0:
                # a leaderless single variable is never empty (`{x}` matches no empty segment)
                quantifier = "++" if not spec.first else "*+"
                values.append(f"(?P<{group}>{chars}{quantifier})")
            elif self._reverse:
                values.append(f"(?:(?P<{group}>{chars}*+){re.escape(spec.separator)})?")
            else:
                values.append(f"(?:{re.escape(spec.separator)}(?P<{group}>{chars}*+))?")
        body = "".join(values[::-1] if self._reverse else values)
        if not spec.first:
            return body
        lead = re.escape(spec.first)
        return f"(?:{body}{lead})?" if self._reverse else f"(?:{lead}{body})?"

    def _group(self, expression: _Expression, var: _Var | None) -> str:
        name = f"g{len(self._groups)}"
        self._groups[name] = (expression, var)
        return name

    def read(self, text: str) -> tuple[int, dict[str, str | list[str]]] | None:
        """How much of `text` (from its start) the parts take, and the values read; None: no match."""
        found = self._regex.match(text)
        if found is None:
            return None
        values: dict[str, str | list[str]] = {}
        for group, (expression, var) in self._groups.items():
            raw = found.group(group)
            if raw is None:
                continue
            if self._reverse:
                raw = raw[::-1]
            if var is None:
                values.update(_pairs(expression.variables, raw, ";"))
                continue
            value = unquote(raw)
            if var.prefix is not None and len(value) > var.prefix:
                return None
            values[var.name] = value
        return found.end(), values


def _values(expression: _Expression, text: str) -> dict[str, str | list[str]]:
    """An unnamed expression's values from its text (its lead removed): split at its separator,
    in order; an exploded variable takes the rest, as a list."""
    variables = expression.variables
    pieces = text.split(expression.spec.separator) if len(variables) > 1 or variables[0].explode else [text]
    values: dict[str, str | list[str]] = {}
    for index, var in enumerate(variables):
        if index >= len(pieces):
            break
        if var.explode:
            values[var.name] = [unquote(piece) for piece in pieces[index:]]
            break
        values[var.name] = unquote(pieces[index])
    return values


def _pairs(variables: Sequence[_Var], text: str, separator: str) -> dict[str, str | list[str]]:
    """The values of named variables from `name=value` pairs (any order, unknown names ignored);
    an exploded variable collects every value of its name."""
    wanted = {var.name: var for var in variables}
    values: dict[str, str | list[str]] = {}
    for pair in text.split(separator):
        name, _, value = pair.partition("=")
        var = wanted.get(unquote(name)) if pair else None
        if var is None:
            continue
        if var.explode:
            listed = values.setdefault(var.name, [])
            assert isinstance(listed, list)
            listed.append(unquote(value))
        else:
            values[var.name] = unquote(value)
    return values
