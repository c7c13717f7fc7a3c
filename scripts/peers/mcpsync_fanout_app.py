"""mcpsync serving the tools `scripts/bench-fanout` needs, with the listen cap it is told: the
mcpsync peer of `scripts/peers/sdk_http_server.py --max-subscriptions N`.

    MCPSYNC_FANOUT_SUBSCRIPTION_CAP=10016 python -m mcpsync serve scripts/peers/mcpsync_fanout_app.py \\
        --http 127.0.0.1:0 --max-connections 10064 --max-streams 10016

Why a file of its own: `mcpsync serve` has no option for `Server(subscription_cap=...)`, whose
default (DEFAULT_SUBSCRIPTION_CAP, 1024) refuses the 1025th open listen with -32603 "Subscription
limit reached" whatever `--max-streams` says, so N=10,000 listens cannot be held by
`integration/dynamic_app.py`. The cap comes from the environment variable
MCPSYNC_FANOUT_SUBSCRIPTION_CAP (default: mcpsync's own default).

Tools, as in integration/dynamic_app.py:
  echo(text)   the text
  add_tool()   registers `dyn_N` (N = 1, 2, ...); every open listen is told before the call returns;
               answers the new tool's name
"""

import itertools
import os

from mcpsync import Server, Service
from mcpsync.transport.subscriptions import DEFAULT_SUBSCRIPTION_CAP

service = Service("fanout")
_sequence = itertools.count(1)


@service.tool
def echo(text: str) -> str:
    """Return the given text."""
    return text


@service.tool
def add_tool() -> str:
    """Register a new tool `dyn_N` (its clients are told before this call returns) and name it."""
    name = f"dyn_{next(_sequence)}"

    def dynamic() -> str:
        return name

    dynamic.__doc__ = f"A tool added at runtime ({name})."
    service.tool(dynamic, name=name)
    return name


server = Server("fanout", services=[service],
                subscription_cap=int(os.environ.get("MCPSYNC_FANOUT_SUBSCRIPTION_CAP", DEFAULT_SUBSCRIPTION_CAP)))
