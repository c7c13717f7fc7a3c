"""The MCP endpoint over HTTP (Streamable HTTP, both eras) as a WSGI application.

`endpoint.WsgiTransport` is the application; `serving.HttpServing` runs it on `mcpsync.httpd`;
`options` holds the defaults and imports nothing (so a stdio server names them without loading
this transport). The rest is the endpoint's own business: the rules of a request (`_rules`,
`_headers`, `_cors`), its answers (`_replies`, `_stream`), the handshake era's sessions
(`_sessions`, `_directory`) and resumable POST streams (`_resume`). Nothing here is imported at
`import mcpsync`: a program that serves stdio never loads it.
"""
