"""Java's value conversions and orderings that RocketMQ's SQL92 filter relies on.

Message properties are strings; when a filter compares one with a number, RocketMQ
converts it with Integer/Long/Double.valueOf or Boolean.valueOf depending on the other
side's type, and a failed conversion aborts the whole evaluation. These functions
reproduce exactly those conversions, raising `EvaluationAborted` where Java throws. They
run on the evaluation hot path, so they must stay allocation-light and never do I/O.
"""

from __future__ import annotations

import math
import re
import struct

INT_MIN, INT_MAX = -(1 << 31), (1 << 31) - 1
LONG_MIN, LONG_MAX = -(1 << 63), (1 << 63) - 1
DOUBLE_MIN_VALUE = 5e-324  # Java Double.MIN_VALUE: the smallest positive double

# String.trim() (which Double.valueOf applies) strips every char <= U+0020.
_JAVA_TRIM = "".join(chr(c) for c in range(0x21))
_DECIMAL_DOUBLE = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?[fFdD]?")
_plain_double = re.compile(r"-?[0-9]+\.?[0-9]*").fullmatch
_HEX_DOUBLE = re.compile(
    r"([+-]?)0[xX]((?:[0-9a-fA-F]+\.?[0-9a-fA-F]*|\.[0-9a-fA-F]+)[pP][+-]?[0-9]+)[fFdD]?"
)
_SPECIAL_DOUBLES = {
    f"{sign}{name}": value
    for sign in ("", "+", "-")
    for name, value in (("NaN", math.nan), ("Infinity", math.inf))
}
_SPECIAL_DOUBLES["-Infinity"] = -math.inf
_SIGNS = ("+", "-")
_CANONICAL_NAN_BITS = 0x7FF8000000000000
_DOUBLE_BITS = struct.Struct("<q")
_DOUBLE = struct.Struct("<d")


class EvaluationAborted(Exception):
    """Where Java would throw during evaluation; the whole filter then does not match."""


def java_int(text: str) -> int:
    """Integer.valueOf(text): optional sign, decimal digits, 32-bit range."""
    if text.isdecimal() or (text[:1] in _SIGNS and text[1:].isdecimal()):
        value = int(text)
        if INT_MIN <= value <= INT_MAX:
            return value
    raise EvaluationAborted(f"{text!r} is not an Integer")


def java_long(text: str) -> int:
    """Long.valueOf(text): optional sign, decimal digits, 64-bit range."""
    if text.isdecimal() or (text[:1] in _SIGNS and text[1:].isdecimal()):
        value = int(text)
        if LONG_MIN <= value <= LONG_MAX:
            return value
    raise EvaluationAborted(f"{text!r} is not a Long")


def java_double(text: str) -> float:
    """Double.valueOf(text): Java's literal syntax incl. NaN, Infinity, hex, f/d suffix."""
    if _plain_double(text) is not None:  # the common case, e.g. "10.25"
        return float(text)
    s = text.strip(_JAVA_TRIM)
    if _DECIMAL_DOUBLE.fullmatch(s):
        return float(s.rstrip("fFdD"))
    special = _SPECIAL_DOUBLES.get(s)
    if special is not None:
        return special
    match = _HEX_DOUBLE.fullmatch(s)
    if match is None:
        raise EvaluationAborted(f"{text!r} is not a double")
    try:
        return float.fromhex(match.group(1) + "0x" + match.group(2))
    except OverflowError:
        return -math.inf if match.group(1) == "-" else math.inf


def java_double_key(text: str) -> float:
    """java_double for comparing against a finite non-zero constant.

    Double.compareTo ranks NaN above everything; against a finite constant +inf ranks the
    same, so the generated code can use plain float operators. (Signed zeros only differ
    from Python when the other side is zero, which a constant here never is.)
    """
    value = java_double(text)
    return value if value == value else math.inf


def java_double_compare(a: float, b: float) -> int:
    """Double.compare: NaN equals NaN and is above +inf; -0.0 is below 0.0."""
    if a < b:
        return -1
    if a > b:
        return 1
    bits_a, bits_b = _bits(a), _bits(b)
    return (bits_a > bits_b) - (bits_a < bits_b)


def _bits(value: float) -> int:
    if value != value:
        return _CANONICAL_NAN_BITS
    return _DOUBLE_BITS.unpack(_DOUBLE.pack(value))[0]


def java_boolean(text: str) -> bool:
    """Boolean.valueOf(text): "true" in any ASCII case, everything else is false."""
    return text.isascii() and text.lower() == "true"


def boolean_against_string() -> bool:
    """RocketMQ casts the Boolean to String here (a ClassCastException): always aborts."""
    raise EvaluationAborted("a boolean cannot be compared with a string")
