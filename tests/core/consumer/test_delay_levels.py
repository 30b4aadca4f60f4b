"""messageDelayLevel parsing."""

from __future__ import annotations

import pytest

from rocketport.core.consumer.delay_levels import (
    DEFAULT_DELAY_LEVELS,
    DelayLevelError,
    parse_delay_levels,
)

S, M, H = 1_000, 60_000, 3_600_000


def test_default_levels_are_rocketmqs_eighteen():
    assert DEFAULT_DELAY_LEVELS == (
        1 * S, 5 * S, 10 * S, 30 * S,
        1 * M, 2 * M, 3 * M, 4 * M, 5 * M, 6 * M, 7 * M, 8 * M, 9 * M, 10 * M, 20 * M, 30 * M,
        1 * H, 2 * H,
    )
    assert len(DEFAULT_DELAY_LEVELS) == 18


def test_all_units_and_extra_whitespace():
    assert parse_delay_levels("  1s\t2m  3h\n4d ") == (1 * S, 2 * M, 3 * H, 4 * 86_400_000)


def test_large_values():
    assert parse_delay_levels("90s 120m") == (90 * S, 120 * M)


@pytest.mark.parametrize(
    ("text", "bad"),
    [
        ("1s 5x 10s", "'5x'"),
        ("1s 5 10s", "'5'"),
        ("1s s", "'s'"),
        ("1.5s", "'1.5s'"),
        ("-1s", "'-1s'"),
        ("1S", "'1S'"),
        ("1s,5s", "'1s,5s'"),
        ("1ms", "'1ms'"),
        ("\u0661s", "'\u0661s'"),  # Arabic-Indic digit one: ASCII digits only
    ],
)
def test_errors_name_the_bad_token(text, bad):
    with pytest.raises(DelayLevelError, match=bad):
        parse_delay_levels(text)


def test_error_names_the_level_number():
    with pytest.raises(DelayLevelError, match="level 3"):
        parse_delay_levels("1s 2s oops")


def test_zero_delay_is_rejected():
    with pytest.raises(DelayLevelError, match="'0s' is not positive"):
        parse_delay_levels("1s 0s")


@pytest.mark.parametrize("text", ["", "   "])
def test_empty_is_rejected(text):
    with pytest.raises(DelayLevelError, match="empty"):
        parse_delay_levels(text)


def test_delay_level_error_is_a_value_error():
    assert issubclass(DelayLevelError, ValueError)
