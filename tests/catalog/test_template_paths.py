"""A template's values are what a client wrote, and a resource function often makes a file path of
them: a value that is a path where none may be (a `..` segment, an absolute path, a NUL), however
it was encoded, is refused -32602 before the function runs, in both eras over a real pipe, and the
search stops there (a later, more permissive template is never tried). A variable named in
`paths=` takes any path. And the levels 3 and 4 reach the function: lists, query values."""

from __future__ import annotations

import pytest

import mcpsync
from mcpsync import McpError, Server, Service

pytestmark = pytest.mark.timeout(60)


def _service(ran: list[str]) -> Service:
    service = Service("files")

    @service.resource("files://{+path}")
    def read_file(path: str) -> str:
        ran.append(path)
        return f"file {path}"

    @service.resource("notes://{name}{?lang}")
    def note(name: str, lang: str = "en") -> str:
        ran.append(name)
        return f"note {name} in {lang}"

    @service.resource("tree://root{/parts*}")
    def tree(parts: list[str]) -> str:
        return " > ".join(parts)

    @service.resource("git://diff/{+range}", paths=["range"])
    def diff(range: str) -> str:
        return f"diff {range}"

    @service.resource("files://{+raw}", paths=["raw"])  # matches what the first does, and is never tried for it
    def raw_file(raw: str) -> str:
        ran.append(f"raw:{raw}")
        return "raw"

    return service


@pytest.mark.parametrize("mode", ["legacy", "modern"])
@pytest.mark.parametrize("uri", [
    "files://../etc/passwd",
    "files://a/../../etc/passwd",
    "files://%2E%2E/%2e%2e/etc/passwd",  # encoded, decoded before it is checked
    "files:///etc/passwd",  # absolute
    "files://%2Fetc%2Fpasswd",
    "files://C:%5CWindows%5Cwin.ini",
    "files://%5C%5Cserver%5Cshare",  # UNC
    "files://a%00.txt",
    "notes://..%2F..%2Fsecrets",
    "notes://x?lang=..%2F..",
    "tree://root/a/../b",
])
def test_a_value_that_is_a_path_where_none_may_be_is_refused_before_the_function_runs(mode: str, uri: str) -> None:
    ran: list[str] = []
    server = Server("files", services=[_service(ran)])
    with mcpsync.connect(server, mode=mode) as session:
        with pytest.raises(McpError) as refused:
            session.read_resource(uri)
    assert refused.value.code == -32602 and "is a path it may not be" in refused.value.message
    assert ran == []


@pytest.mark.parametrize("mode", ["legacy", "modern"])
def test_values_reach_the_function_decoded_and_a_path_variable_takes_any_path(mode: str) -> None:
    ran: list[str] = []
    server = Server("files", services=[_service(ran)])
    with mcpsync.connect(server, mode=mode) as session:
        def text(uri: str) -> str:
            return str(session.read_resource(uri)["contents"][0]["text"])

        assert text("files://docs/read%20me.md") == "file docs/read me.md"
        assert text("notes://caf%C3%A9?lang=fr") == "note café in fr"
        assert text("notes://plain") == "note plain in en"
        assert text("tree://root/a/b%2Fc/d") == "a > b/c > d"
        assert text("git://diff/main..feature") == "diff main..feature"  # exempt: `..` is its syntax


@pytest.mark.parametrize("mode", ["legacy", "modern"])
def test_the_variables_of_levels_3_and_4_are_completed_by_name(mode: str) -> None:
    service = Service("search")

    @service.resource("notes://search{/tags*}{?q,lang}", complete={"lang": ["en", "fr", "pt"], "tags": ["work", "home"]})
    def search(q: str, lang: str = "en", tags: list[str] | None = None) -> str:
        return f"{q} {lang} {tags}"

    with mcpsync.connect(Server("search", services=[service]), mode=mode) as session:
        ref = {"type": "ref/resource", "uri": "notes://search{/tags*}{?q,lang}"}
        assert session.complete(ref, "lang", "f")["values"] == ["fr"]
        assert session.complete(ref, "tags", "")["values"] == ["work", "home"]
        with pytest.raises(McpError) as unknown:
            session.complete(ref, "sort", "")
        assert unknown.value.code == -32602
