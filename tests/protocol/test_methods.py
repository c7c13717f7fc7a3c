"""Tests for mcpsync.protocol.methods: which requests exist in which era."""

from __future__ import annotations

from mcpsync.engine.engine import OPERATIONS
from mcpsync.protocol.methods import (
    COMMON_METHODS,
    HANDSHAKE_METHODS,
    HANDSHAKE_ONLY_METHODS,
    MODERN_METHODS,
    MODERN_ONLY_METHODS,
)


def test_each_era_has_the_common_methods_and_its_own() -> None:
    assert HANDSHAKE_METHODS == COMMON_METHODS | HANDSHAKE_ONLY_METHODS
    assert MODERN_METHODS == COMMON_METHODS | MODERN_ONLY_METHODS
    assert not HANDSHAKE_ONLY_METHODS & MODERN_ONLY_METHODS
    assert not COMMON_METHODS & (HANDSHAKE_ONLY_METHODS | MODERN_ONLY_METHODS)


def test_the_handshake_and_its_replacement_belong_to_one_era_each() -> None:
    assert "initialize" in HANDSHAKE_METHODS and "initialize" not in MODERN_METHODS
    assert "server/discover" in MODERN_METHODS and "server/discover" not in HANDSHAKE_METHODS
    assert "subscriptions/listen" not in HANDSHAKE_METHODS
    assert "resources/subscribe" not in MODERN_METHODS


def test_the_engine_implements_exactly_the_methods_of_the_two_eras() -> None:
    assert set(OPERATIONS) == HANDSHAKE_METHODS | MODERN_METHODS
