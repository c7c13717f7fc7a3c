"""The stdio transport: one client on a pair of descriptors (fds 0 and 1, or pipes).

`server.StdioServer` reads and dispatches frames; `_exchange` is one request as a tool sees it;
`_output` is the wire's single writer. The lifecycle it shares with HTTP is in `../lifecycle`.
"""
