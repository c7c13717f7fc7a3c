"""A Flask app whose monthly report takes four minutes, and the same report as an MCP task.

The Flask part is the app as it was: `build_report` is its function, `/reports/<month>` its page.
The MCP part is three lines more: the function as a tool that runs as a task, and the MCP endpoint
served beside the Flask app on one WSGI application (`/mcp` for MCP, every other path Flask's).
"""

import os
import time

from flask import Flask

from mcpsync import Context, Server, Service

REGIONS = ("north", "south", "east", "west")
STEP_SECONDS = float(os.environ.get("REPORT_STEP_SECONDS", "60"))  # one slow query a region


def build_report(month, on_step=None, stopped=lambda: False):
    """The app's own function: four slow queries, one line each."""
    lines = [f"Sales report for {month}"]
    for number, region in enumerate(REGIONS, 1):
        if stopped():
            return "\n".join(lines + ["(stopped)"])
        time.sleep(STEP_SECONDS)  # stands in for the query
        lines.append(f"{region}: {100 * number} units")
        if on_step is not None:
            on_step(number, len(REGIONS), f"{region} done")
    return "\n".join(lines)


app = Flask(__name__)


@app.get("/reports/<month>")
def report_page(month):
    return build_report(month), 200, {"Content-Type": "text/plain"}


service = Service("reports")


@service.tool(task="required")
def monthly_report(month: str, ctx: Context) -> str:
    """Build the month's sales report (about four minutes)."""
    return build_report(month, on_step=ctx.progress, stopped=lambda: ctx.cancelled)


server = Server("reports", services=[service])
application = server.wsgi_app(fallback=app)  # for gunicorn: reports:application
