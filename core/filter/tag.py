"""Tag subscriptions (`*`, `TagA || TagB`) as RocketMQ's FilterAPI builds them.

The broker prefilters ConsumeQueue entries by tag hash code and the exact tag check
follows (RocketMQ does that part in the client; we do it in the broker so every protocol
gets the same answer). Pure computation: never I/O, never a protocol.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import ClassVar

from rocketport.common.message import TAGS_NEEDLES, property_bytes
from rocketport.common.tags import tags_code
from rocketport.core.filter.base import MessageFilter

SUB_ALL = "*"
TAG_SEPARATOR = "||"


def parse_tag_expression(expression: str | None) -> frozenset[str] | None:
    """The subscribed tags, or None for "all" (`*`, empty or None, exactly as RocketMQ).

    Parts are split on `||`, trimmed, and empty parts dropped; so `"||"` subscribes to no
    tag at all and matches nothing, and `" * "` subscribes to the literal tag `*`.
    """
    if not expression or expression == SUB_ALL:
        return None
    return frozenset(
        part for part in (raw.strip() for raw in expression.split(TAG_SEPARATOR)) if part
    )


def tag_filter_codes(expression: str | None) -> frozenset[int] | None:
    """The tagsCode set a ConsumeQueue prefilter needs, or None when every code passes."""
    tags = parse_tag_expression(expression)
    return None if tags is None else frozenset(tags_code(tag) for tag in tags)


def _as_java_int(code: int) -> int:
    # RocketMQ compares tagsCode.intValue(): the low 32 bits, signed.
    return ((code + 0x80000000) & 0xFFFFFFFF) - 0x80000000


def _raw_tags(tags: frozenset[str]) -> frozenset[bytes]:
    """The TAGS property bytes that `raw_property` decodes (UTF-8, surrogateescape) to one
    of ``tags``; a tag no bytes decode to has none."""
    out = set()
    for tag in tags:
        try:
            raw = tag.encode("utf-8", "surrogateescape")
        except UnicodeEncodeError:
            continue
        if raw.decode("utf-8", "surrogateescape") == tag:
            out.add(raw)
    return frozenset(out)


@dataclass(frozen=True, slots=True)
class TagFilter(MessageFilter):
    """A compiled tag subscription; `subscribe_all` is True for `*`."""

    expression_type: ClassVar[str] = "TAG"

    expression: str
    tags: frozenset[str]
    codes: frozenset[int]
    subscribe_all: bool
    raw_tags: frozenset[bytes] = frozenset()  # the tags as a stored TAGS property holds them

    @classmethod
    def compile(cls, expression: str | None) -> TagFilter:
        tags = parse_tag_expression(expression)
        if tags is None:
            return cls(SUB_ALL, frozenset(), frozenset(), True)
        return cls(expression or "", tags, frozenset(tags_code(t) for t in tags), False,
                   _raw_tags(tags))

    def match_tags_code(self, tags_code: int) -> bool:
        return self.subscribe_all or _as_java_int(tags_code) in self.codes

    def match(self, tags: str | None, properties: Mapping[str, str]) -> bool:
        return self.subscribe_all or tags in self.tags

    @property
    def raw_matcher(self) -> Callable[[bytes], bool]:
        return self._match_raw

    def _match_raw(self, raw: bytes) -> bool:
        # the property's bytes compared undecoded: the broker's scan checks every candidate
        return self.subscribe_all or property_bytes(raw, TAGS_NEEDLES) in self.raw_tags

    @property
    def prefilter_codes(self) -> frozenset[int] | None:
        return None if self.subscribe_all else self.codes

    @property
    def needs_exact_check(self) -> bool:
        return not self.subscribe_all  # a tag hash can collide: check the tag itself
