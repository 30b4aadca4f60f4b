"""Shared fixtures: a fake millisecond clock so expiry tests never sleep."""

from __future__ import annotations

import pytest


class FakeClock:
    """Callable clock in milliseconds, moved forward by hand."""

    def __init__(self, now_ms: int = 1_000_000) -> None:
        self.now_ms = now_ms

    def __call__(self) -> int:
        return self.now_ms

    def advance(self, ms: int) -> None:
        self.now_ms += ms


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()
