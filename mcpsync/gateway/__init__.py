"""The gateway: remote MCP servers served behind this one.

`upstream.py` builds a `RemoteSource` for an upstream command or URL; `remote.py` mirrors its
tools, prompts and resources into the catalog and supervises its connection (the one thread this
package starts per upstream); `relay.py` forwards calls and carries the questions an upstream asks
during one. The catalog stays thread-free: it only holds the sources and asks them.
"""
