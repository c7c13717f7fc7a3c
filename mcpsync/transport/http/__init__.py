"""The MCP endpoint over HTTP (Streamable HTTP, both eras) as a WSGI application.

`endpoint.WsgiTransport` is the application; `serving.HttpServing` runs it on `mcpsync.httpd`;
`options` holds the defaults and imports nothing (so a stdio server names them without loading
this transport). The rest is the endpoint's own business: its parts, which share one lock
(`_state`): the head's rules (`_gate`), the POST path (`_post`), each request's run and answer
(`_requests`), a session's lookup, GET and DELETE (`_session_paths`) and the open listens
(`_listens`); the rules of a request (`_rules`, `_headers`, `_cors`), its answers (`_replies`,
`_stream`), the handshake era's sessions (`_sessions`, `_directory`) and resumable POST streams
(`_resume`). Nothing here is imported at `import mcpsync`: a program that serves stdio never
loads it.
"""
