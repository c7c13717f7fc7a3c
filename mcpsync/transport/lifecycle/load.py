"""What a transport holds at this moment, for an operator's gauges (`mcpsync.telemetry`)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Load:
    """Requests in flight (running, or waiting for a worker or an upstream), open streams (listens,
    and over HTTP the handshake era's GET streams), handshake-era sessions held, and (a server's
    whole load only) tasks running or waiting for a worker. `busy` of the `workers` that run
    requests are taken (running one, or one is queued for it): the pool is saturated when they
    are equal, and requests then wait."""

    requests: int = 0
    streams: int = 0
    sessions: int = 0
    tasks: int = 0
    busy: int = 0
    workers: int = 0

    def __add__(self, other: Load) -> Load:
        return Load(
            self.requests + other.requests, self.streams + other.streams, self.sessions + other.sessions,
            self.tasks + other.tasks, self.busy + other.busy, self.workers + other.workers,
        )
