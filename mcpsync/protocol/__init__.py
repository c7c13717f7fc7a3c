"""Wire vocabulary: JSON-RPC frames and their newline framing, error codes, the two protocol eras and
their methods. No I/O, no threads: every layer above may import it."""
