"""JSON decoding that also accepts fastjson's unquoted object keys.

RocketMQ's name server serializes `HashMap<Long, String>` as `{0:"addr"}`, and clients
built on fastjson may send such JSON too. `loads_lenient` parses strict JSON at full speed
and, only when that fails, quotes bare keys and retries. It must never evaluate input or
accept anything beyond JSON plus bare keys.
"""

from __future__ import annotations

import re

import orjson

# A string literal (skipped whole, so nothing inside it is touched) or a bare key after
# `{` or `,`. Scanning left to right, every quote opens a literal that the first branch
# consumes, so the second branch only ever sees text outside strings. A literal left open
# runs to the end of the text (which then is no JSON): were the branch to fail there, the
# scan would try again from each later quote and take time quadratic in the text (a 100 KB
# body of `"\\` pairs took minutes). The possessive `*+` never gives back what it matched.
_STRING_OR_BARE_KEY = re.compile(r'("(?:[^"\\]|\\[\s\S])*+(?:"|[\s\S]*))|([{,]\s*)([A-Za-z0-9_$.+-]+)(\s*:)')


class LenientJSONError(ValueError):
    """The data is neither JSON nor JSON with bare keys."""


def _quote_key(match: re.Match[str]) -> str:
    if match.group(1) is not None:
        return match.group(1)
    return f'{match.group(2)}"{match.group(3)}"{match.group(4)}'


def loads_lenient(data: bytes | bytearray | memoryview | str) -> object:
    """Parse `data` as JSON, accepting `{key: value}` with unquoted keys."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        pass
    try:
        text = data if isinstance(data, str) else bytes(data).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise LenientJSONError(f"not UTF-8: {exc}") from None
    try:
        return orjson.loads(_STRING_OR_BARE_KEY.sub(_quote_key, text))
    except orjson.JSONDecodeError as exc:
        raise LenientJSONError(f"not JSON: {exc}") from None
