"""Delay levels: the ``messageDelayLevel`` setting parsed into milliseconds.

A delayed message carries a level (1-based: level 1 is the first entry), not a duration;
the broker parks it in ``SCHEDULE_TOPIC_XXXX`` queue ``level - 1`` and delivers it after the
level's delay. Retries use the same table (delay level 3 + reconsumeTimes). Parsing happens
once at start-up so a typo stops the broker with the bad token named, rather than silently
delivering at the wrong time. This module never schedules anything.
"""

from __future__ import annotations

import re

_UNIT_MS = {"s": 1_000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
_TOKEN = re.compile(r"([0-9]+)([smhd])")

DEFAULT_MESSAGE_DELAY_LEVEL = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"


class DelayLevelError(ValueError):
    """A ``messageDelayLevel`` string that cannot be parsed; the message names the token."""


def parse_delay_levels(level_string: str) -> tuple[int, ...]:
    """``"1s 5m 2h"`` -> ``(1000, 300000, 7200000)``; units s, m, h, d; whitespace-separated.

    Each delay must be a positive whole number followed by one unit, as RocketMQ reads it.
    """
    tokens = level_string.split()
    if not tokens:
        raise DelayLevelError("messageDelayLevel is empty: expected e.g. '1s 5s 10s'")
    delays = []
    for level, token in enumerate(tokens, start=1):
        match = _TOKEN.fullmatch(token)
        if match is None:
            raise DelayLevelError(
                f"messageDelayLevel level {level}: bad token {token!r}, expected a whole "
                "number and a unit s, m, h or d (e.g. '30s')"
            )
        amount = int(match.group(1))
        if amount == 0:
            raise DelayLevelError(f"messageDelayLevel level {level}: {token!r} is not positive")
        delays.append(amount * _UNIT_MS[match.group(2)])
    return tuple(delays)


DEFAULT_DELAY_LEVELS: tuple[int, ...] = parse_delay_levels(DEFAULT_MESSAGE_DELAY_LEVEL)
