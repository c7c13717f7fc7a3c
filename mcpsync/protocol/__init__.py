"""Wire vocabulary: JSON-RPC frames, error codes and the two protocol eras. No behaviour."""
