"""Serve reports.py on a free port, read its Flask page, and run its report as a task."""

import os
import urllib.request

os.environ["REPORT_STEP_SECONDS"] = "0.1"  # four minutes would be long for an example

import mcpsync
from reports import app, server

serving = server.start_http("127.0.0.1", 0, fallback=app)
base = serving.url.removesuffix("/mcp")
with urllib.request.urlopen(f"{base}/reports/2026-11") as page:
    print("Flask:", page.read().decode().splitlines()[-1])

with mcpsync.connect(serving.url) as session:
    task = session.call_tool("monthly_report", {"month": "2026-11"}, task=True)
    print("task:", task.status)
    final = task.wait(timeout=30)
    print("then:", final.status, "-", final.message)
    print(task.result()["content"][0]["text"])

server.close()
