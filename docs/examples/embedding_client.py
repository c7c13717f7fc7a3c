"""embedding_client.py: watch embedding.py change what it serves (run: python embedding_client.py)."""
import sys
import tempfile

import mcpsync

with tempfile.TemporaryFile("w+") as app_stderr:
    with mcpsync.connect([sys.executable, "embedding.py"], stderr=app_stderr) as session:
        with session.listen(tools=True) as events:
            names = [tool["name"] for tool in session.list_tools()]
            while "widget_report" not in names or "admin_reset" not in names:  # the app has not got there yet
                if events.next_event(10) is None:
                    sys.exit("embedding.py announced no change")
                names = [tool["name"] for tool in session.list_tools()]
        print(names)
        print(session.call_tool("widget_report")["content"][0]["text"])
        print(session.call_tool("status")["structuredContent"]["admin"])
    # leaving the with block closed the app's stdin: its loop ended, and so did the app
    app_stderr.seek(0)
    print("the app's stderr:", app_stderr.read().strip())
