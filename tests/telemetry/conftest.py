"""The telemetry tests' fixture: a fresh `Recorded` per test, its providers shut down after."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from .recording import Recorded


@pytest.fixture
def recorded() -> Iterator[Recorded]:
    recorded = Recorded()
    yield recorded
    recorded.tracer_provider.shutdown()
    recorded.meter_provider.shutdown()
