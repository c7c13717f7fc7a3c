"""listen_demo.py: follow a server's changes (run: python listen_demo.py, beside clock.py)."""
import sys

import mcpsync
from mcpsync import ListChanged, ResourceUpdated

with mcpsync.connect([sys.executable, "-m", "mcpsync", "serve", "clock.py"]) as session:
    with session.listen(tools=True, resource_uris=["clock://now"]) as events:
        session.call_tool("add_alarm", {"at": "07:30"})
        for seen, event in enumerate(events, 1):
            if isinstance(event, ListChanged):        # list it again
                print(event.kind, "changed:", [tool["name"] for tool in session.list_tools()])
            elif isinstance(event, ResourceUpdated):  # read it again
                print(event.uri, "is now", session.read_resource(event.uri)["contents"][0]["text"])
            if seen == 3:
                break                                 # leaving the with block unsubscribes
