"""Tags codes: the 8-byte hash a ConsumeQueue entry carries to prefilter by tag.

RocketMQ uses Java's String.hashCode of the tag, so we compute exactly that (over UTF-16
code units, 32-bit signed) and cache it: tags repeat, and the per-character loop is slow
in Python.
"""

from __future__ import annotations

from functools import lru_cache


@lru_cache(maxsize=65536)
def tags_code(tags: str | None) -> int:
    """Java ``String.hashCode()`` of ``tags``; 0 for no tags (as RocketMQ)."""
    if not tags:
        return 0
    data = tags.encode("utf-16-be", "surrogatepass")
    h = 0
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - 0x100000000 if h & 0x80000000 else h


@lru_cache(maxsize=65536)
def tags_code_of_value(tags: bytes | None) -> int:
    """`tags_code` of an undecoded TAGS value (`core.message.property_bytes`), as a send
    that keeps its properties encoded has it."""
    return tags_code(tags.decode("utf-8", "surrogateescape")) if tags else 0
