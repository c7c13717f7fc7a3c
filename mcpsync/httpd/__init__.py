"""mcpsync's HTTP/1.1 server: a WSGI server that knows nothing of MCP.

`server.WsgiServer` serves one WSGI application (requests parsed by httptools in `_parse`, each
connection's life in `_connection`, readiness from `_poller`, responses framed by `_response`, the
bodies held at once bounded by `_budget`); `options` holds its defaults and types and imports
nothing, so naming them loads no server. Nothing here imports the rest of mcpsync but `errors`
and the worker pool (tests/test_layers.py holds it to that): the MCP endpoint is one application
it can serve, `transport/http`.
"""
