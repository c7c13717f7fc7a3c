"""What both transports do with a request once it is decoded: the table of requests in flight
(`inflight`), the questions asked of the client (`asks`), cancellation (`cancellation`) and the
registry of open listens (`subscriptions`). Public modules, so `stdio/` and `http/` import them
alike and neither imports the other.
"""
