"""`mcpsync serve --bus URL`: a bus it cannot make is a usage error that never repeats the URL,
which may carry a password (the bus across processes is integration/test_bus_replicas.py's)."""

from __future__ import annotations

import subprocess
import sys

from tests._timeouts import LONG


def test_a_bus_url_of_no_known_scheme_is_a_usage_error_that_hides_the_url() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "mcpsync", "serve", "--bus", "kafka://user:s3cret@broker:9092"],
        capture_output=True, text=True, timeout=LONG, stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 2
    assert "--bus: expected a URL starting with memory://, redis://, rediss://" in done.stderr
    assert "s3cret" not in done.stderr
