"""templates.py: resource templates of every RFC 6570 level, and a path that climbs out refused (run: python templates.py)."""
from pathlib import Path

import mcpsync
from mcpsync import McpError, Server, Service, UriTemplate

DOCS = Path("/srv/docs")
service = Service("docs")


@service.resource("docs://tags{/tags*}")
def tagged(tags: list[str]) -> str:
    """Pages with every tag given (before the template below, which would match these URIs too)."""
    return f"pages tagged {' and '.join(tags)}"


@service.resource("docs://{+path}{?lang}")
def page(path: str, lang: str = "en") -> str:
    """A page of the docs, in a language; `path` may hold `/` but never climbs out (`..`)."""
    return f"would read {DOCS / lang / path}"


server = Server("docs", services=[service])
with mcpsync.connect(server) as session:
    for uri in ("docs://guide/intro.md?lang=fr", "docs://tags/http/auth", "docs://../../etc/passwd"):
        try:
            print(session.read_resource(uri)["contents"][0]["text"])
        except McpError as exc:
            print(f"refused {exc.code}: {exc.message}")
    print(UriTemplate("docs://{+path}{?lang}").expand({"path": "api/index.md", "lang": "pt"}))
