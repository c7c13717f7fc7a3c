"""embedding.py: a blocking app that serves MCP on stdio in the background while it keeps working."""
import threading
import time

from mcpsync import Server, Service

ADMIN_MODE = threading.Event()
tools = Service("app")


@tools.tool
def status() -> dict:
    """The app's status."""
    return {"admin": ADMIN_MODE.is_set(), "time": time.time()}


@tools.tool
def admin_reset() -> str:
    """Reset everything (only listed in admin mode)."""
    return "reset"


@tools.resource("app://log")
def app_log() -> str:
    """The app's log."""
    return "started\n"


server = Server(
    "my-app",
    services=[tools],
    tool_filter=lambda tool: ADMIN_MODE.is_set() or not tool.name.startswith("admin_"),
)
server.start_stdio()                # returns at once; the wire is served on a background thread
print("app: serving MCP on stdio")  # fd 1 now points at stderr: this never reaches the client

# ... later, from any thread of the app:
reports = Service("reports")
reports.tool(lambda: "42 widgets", name="widget_report")
server.add_service(reports)                  # clients get notifications/tools/list_changed
server.notify_resource_updated("app://log")  # subscribers of app://log get resources/updated
ADMIN_MODE.set()
server.refresh_tools()                       # the filter's answer changed: tell clients

while not server.wait(0.5):  # the app's own loop; serving ends when stdin closes
    pass
server.shutdown()            # stops serving gracefully; safe from any thread, at any time
