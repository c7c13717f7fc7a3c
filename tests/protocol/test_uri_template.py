"""RFC 6570 templates: expansion checked against `uritemplate` (python-hyper's implementation of the
RFC, nobody here wrote it) on the RFC's own examples; matching checked by round trips through that
expansion; the matching rules a resource author relies on; templates refused, and why; and URIs a
hostile client sends, which must be matched in time linear in their length."""

from __future__ import annotations

from typing import Any

import pytest
import uritemplate

from mcpsync.protocol.uri_template import MAX_URI_LENGTH, UriTemplate

pytestmark = pytest.mark.timeout(60)

# The RFC's variables (its section 3.2), the mapping's keys in sorted order: `uritemplate` sorts an
# associative array's pairs, the RFC (and mcpsync) keep the order given.
RFC = {
    "count": ["one", "two", "three"], "dom": ["example", "com"], "dub": "me/too", "hello": "Hello World!", "half": "50%",
    "var": "value", "who": "fred", "base": "http://example.com/home/", "path": "/foo/bar", "list": ["red", "green", "blue"],
    "keys": {"comma": ",", "dot": ".", "semi": ";"}, "v": "6", "x": "1024", "y": "768", "empty": "", "empty_keys": {}, "undef": None,
}
RFC_TEMPLATES = [
    "{var}", "{hello}", "{+var}", "{+hello}", "{+path}/here", "here?ref={+path}", "X{#var}", "X{#hello}", "map?{x,y}", "{x,hello,y}",
    "{+x,hello,y}", "{+path,x}/here", "{#x,hello,y}", "{#path,x}/here", "X{.var}", "X{.x,y}", "{/var}", "{/var,x}/here", "{;x,y}",
    "{;x,y,empty}", "{?x,y}", "{?x,y,empty}", "?fixed=yes{&x}", "{&x,y,empty}", "{var:3}", "{var:30}", "{list}", "{list*}", "{keys}",
    "{keys*}", "{+path:6}/here", "{+list}", "{+list*}", "{+keys}", "{+keys*}", "{#path:6}/here", "{#list}", "{#list*}", "{#keys}",
    "{#keys*}", "X{.var:3}", "X{.list}", "X{.list*}", "X{.keys}", "X{.keys*}", "{/var:1,var}", "{/list}", "{/list*}", "{/list*,path:4}",
    "{/keys}", "{/keys*}", "{;hello:5}", "{;list}", "{;list*}", "{;keys}", "{;keys*}", "{?var:3}", "{?list}", "{?list*}", "{?keys}",
    "{?keys*}", "{&var:3}", "{&list}", "{&list*}", "{&keys}", "{&keys*}", "{count}", "{count*}", "{/count}", "{/count*}", "{;count}",
    "{;count*}", "{?count}", "{?count*}", "{&count*}", "{who}", "{half}", "{base}index", "O{empty}X", "O{undef}X", "{x,y}",
    "{x,empty}", "{x,undef}", "{?x,undef}", "{?empty_keys}", "{dub}", "{.who}", "{.who,who}", "{.half,who}", "www{.dom*}", "{/who}",
    "{/who,who}", "{/half,who}", "{/who}{/dub}", "{/dub,who}", "{/empty_keys}", "{/empty_keys*}", "{&empty_keys}",
]


@pytest.mark.parametrize("template", RFC_TEMPLATES)
def test_expansion_is_the_rfcs_as_another_implementation_computes_it(template: str) -> None:
    assert UriTemplate(template).expand(RFC) == uritemplate.URITemplate(template).expand(RFC)


def test_an_empty_mapping_is_undefined_as_the_rfc_says() -> None:
    """RFC 6570 section 2.3: an associative array with no members is undefined, so its expression
    expands to nothing (`uritemplate` writes ";empty_keys=" here, which is its own)."""
    assert UriTemplate("X{;empty_keys}").expand(RFC) == "X"


ROUND_TRIPS: list[tuple[str, dict[str, Any]]] = [
    ("notes://{id}", {"id": "42"}),
    ("notes://{id}", {"id": "ünïcode & spaces/slash?"}),
    ("file:///{+path}", {"path": "src/app/main.py"}),
    ("file:///{+path}{?rev,blame}", {"path": "a b/c.txt", "rev": "3", "blame": "yes"}),
    ("search{?q,lang}", {"q": "café au lait", "lang": "fr"}),
    ("search{?q,lang}", {"lang": "fr"}),
    ("/files{/path*}", {"path": ["a", "b c", "d"]}),
    ("/x/{name}{.ext}", {"name": "report", "ext": "json"}),
    ("tags{?tag*}", {"tag": ["red", "green"]}),
    ("{a}-{b}", {"a": "x-y", "b": "z"}),
    ("/p{;x,y}/z", {"x": "1", "y": "2"}),
    ("doc{#section}", {"section": "intro/part 2"}),
    ("repo://{owner}/{repo}/blob/{+path}", {"owner": "me", "repo": "proj", "path": "src/a.py"}),
    ("db://{table}/{id}{?fields}", {"table": "users", "id": "7", "fields": "name"}),
    ("{/a,b}/c", {"a": "x", "b": "y"}),
    ("x{.a,b}", {"a": "1", "b": "2"}),
    ("{+path}{.ext}", {"path": "a/b/file.tar", "ext": "gz"}),
    ("/search?q={q}{&page,size}", {"q": "a&b", "page": "2", "size": "10"}),
    ("api{/version}/items{?limit}{#anchor}", {"version": "v2", "limit": "5", "anchor": "top"}),
    ("{code:3}", {"code": "abc"}),
]


@pytest.mark.parametrize(("template", "values"), ROUND_TRIPS)
def test_a_uri_another_implementation_expanded_matches_back_to_its_values(template: str, values: dict[str, Any]) -> None:
    uri = uritemplate.URITemplate(template).expand(values)
    assert UriTemplate(template).match(uri) == values
    assert UriTemplate(template).expand(values) == uri


@pytest.mark.parametrize(("template", "uri", "found"), [
    ("search{?q,lang}", "search?lang=en&q=x&utm=ignored", {"q": "x", "lang": "en"}),  # any order, unknown names ignored
    ("search{?q,lang}", "search", {}),  # undefined: absent
    ("/x/{name}{.ext}", "/x/report", {"name": "report"}),  # `{.ext}` undefined, its dot too
    ("/files{/path*}", "/files", {}),
    ("notes://{id}", "notes://", None),  # a simple variable is never empty
    ("notes://{id}", "notes://a/b", None),  # nor holds a `/`, which its expansion encodes
    ("notes://{id}", "notes://a%2Fb", {"id": "a/b"}),
    ("file:///{+path}", "file:///", None),
    ("{code:3}", "abcd", None),  # longer than its prefix
    ("doc://{id}", "doc://1#frag", None),  # no fragment in the template: `#` is no value's
])
def test_matching_rules(template: str, uri: str, found: dict[str, Any] | None) -> None:
    assert UriTemplate(template).match(uri) == found


@pytest.mark.parametrize(("template", "reason"), [
    ("notes://{id", "is never closed"),
    ("notes://id}", "with no '{'"),
    ("{=x}", "reserved"),
    ("{a b}", "is no variable"),
    ("{x:0}", "1 to 9999"),
    ("{x:10000}", "is no variable"),
])
def test_a_malformed_template_is_refused_saying_why(template: str, reason: str) -> None:
    with pytest.raises(ValueError, match=reason):
        UriTemplate(template)


@pytest.mark.parametrize(("template", "reason"), [
    ("{+a}/{+b}", "two parts that may span segments"),
    ("/{/path*}/x/{+rest}", "two parts that may span segments"),
    ("{a}{b}", "nothing between them"),
    ("{+path}{ext}", "nothing between them"),
    ("s{?q}/more", "text after a query expression"),
    ("s{?q}{x}", "only {&x} and {#x}"),
    ("s?a={a}{?b}", "second query"),
    ("s?a={a}&b={b}{&c}", "literal '&'"),
    ("{x}/{x}", "names a variable twice"),
])
def test_a_template_that_cannot_be_matched_expands_but_refuses_to_match(template: str, reason: str) -> None:
    made = UriTemplate(template)
    assert isinstance(made.expand({"a": "1"}), str)
    with pytest.raises(ValueError, match=reason):
        made.check_matchable()
    with pytest.raises(ValueError, match=reason):
        made.match("anything")


@pytest.mark.parametrize(("template", "uri"), [
    ("{+path}x{name}.txt", "x" * MAX_URI_LENGTH),  # a regular expression backtracking here would take minutes
    ("{+path}/{name}/{id}", "/" * MAX_URI_LENGTH),
    ("a{/segments*}/z{?q}", "a" + "/b" * (MAX_URI_LENGTH // 2 - 1)),
    ("search{?q,lang}", "search?" + "q=x&" * (MAX_URI_LENGTH // 4 - 2)),
    ("{a}-{b}-{c}", "-" * MAX_URI_LENGTH),
])
def test_a_hostile_uri_of_the_longest_length_is_matched_without_backtracking(template: str, uri: str) -> None:
    """The test's timeout is the guard: each read is linear, so these take milliseconds."""
    UriTemplate(template).match(uri)


def test_a_uri_past_the_longest_length_matches_nothing() -> None:
    assert UriTemplate("x{/a*}").match("x" + "/b" * MAX_URI_LENGTH) is None
