"""protected.py: notes only token holders may use (run: mcpsync serve protected.py --http 127.0.0.1:8000)."""
import logging
from pathlib import Path

from mcpsync import Call, Context, Interceptor, Server, Service
from mcpsync.auth import Auth, StaticTokens

log = logging.getLogger("notes.audit")
service = Service("notes")


@service.tool
def whoami(ctx: Context) -> str:
    """Say who the server thinks is calling."""
    caller = ctx.principal  # None over stdio, which is never protected
    if caller is None:
        return "nobody in particular: no token was checked"
    return f"{caller.subject} (client {caller.client_id}), scopes: {' '.join(sorted(caller.scopes))}"


@service.tool(scopes=["notes:admin"])
def purge() -> str:
    """Delete every note."""
    return "every note is gone"


class Audit(Interceptor):
    def before_execute(self, call: Call):
        if call.method == "tools/call" and call.principal is not None:
            log.info("%s calls %s", call.principal.subject, call.params.get("name"))
        return None  # go on


auth = Auth(
    StaticTokens.from_file(Path(__file__).with_name("tokens.txt")),
    required_scopes=["notes:read"],  # every request needs it
    scope_implies={"notes:admin": ["notes:read"]},  # an administrator may read too
    resource_name="Notes",
)
server = Server("notes", services=[service], interceptors=[Audit()], auth=auth)
