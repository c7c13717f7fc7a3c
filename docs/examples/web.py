"""web.py: a WSGI site with an MCP endpoint at /mcp (run: gunicorn -k gthread --threads 32 web:app)."""
from mcpsync import Server, Service

ROUTES = {"/": "the site's home page", "/about": "about this site"}


def site(environ, start_response):  # any WSGI application: a Flask app, Django's get_wsgi_application()
    body = ROUTES.get(environ["PATH_INFO"])
    start_response("200 OK" if body else "404 Not Found", [("Content-Type", "text/plain")])
    return [(body or "not found").encode()]


tools = Service("site")


@tools.tool
def page_count() -> int:
    """How many pages the site has."""
    return len(ROUTES)


server = Server("site", services=[tools])
app = server.wsgi_app(fallback=site, max_streams=24)  # /mcp is MCP; every other path goes to the site
