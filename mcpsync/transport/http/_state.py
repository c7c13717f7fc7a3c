"""What the parts of one HTTP endpoint share: its one lock, whether it is shutting down, and the
streams open against their bound.

Why one lock for all the parts (`_gate`, `_post`, `_requests`, `_session_paths`, `_listens`): the
orderings the endpoint promises cross them. A listen is registered and its acknowledgement queued
in one critical section that publishing also takes, so no change overtakes its ack; a request
joins the requests in flight in the same section that checks for a shutdown, so `shutdown()`
waits for every request it let in; and listens and GET streams take their places from one count
(`streams`, bounded by `max_streams`).
"""

from __future__ import annotations

import threading


class EndpointState:
    """The state every part of the endpoint reads; `closing` and `streams` change under `lock`."""

    def __init__(self, max_streams: int) -> None:
        # Guards everything the parts share, and orders acks before changes. Re-entrant:
        # answering an exchange runs callbacks (`Requests._forget`) that take it.
        self.lock = threading.RLock()
        self.closing = False
        self.streams = 0  # open listens and GET streams
        self.max_streams = max_streams
