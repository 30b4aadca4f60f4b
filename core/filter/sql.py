"""SQL92 subscriptions: RocketMQ's property filter, parsed once, evaluated per message.

Semantics (RocketMQ 4.x/5.x `filter` module, itself derived from ActiveMQ selectors):
- Properties are strings; a missing property is null. The message's tags are the `TAGS`
  property. Identifiers are case-sensitive; keywords are not.
- Integer literals are Java Integer when they fit 32 bits, else Long (an `L` suffix is
  allowed); decimal/exponent literals are Double and must be >= Double.MIN_VALUE, so
  `0.0` is rejected (as RocketMQ does); negative numbers are unary minus.
- Comparing a property with a number converts the property with the number's type:
  Integer.valueOf, Long.valueOf or Double.valueOf (so `a > 5` fails for a = '5.5', while
  `a > 5.0` works). `>` `>=` `<` `<=` between two properties parse both as doubles.
  `= TRUE/FALSE` against a property tests "true" case-insensitively.
- A failed conversion (and a Boolean constant compared with a string) throws in RocketMQ;
  the broker then treats the whole message as not matched. Here too: evaluation aborts.
- Null: comparisons and IN with a null operand are unknown; `=` is true if both sides are
  null, unknown if only the left is, false if only the right is (and `<>` is NOT of that);
  IS [NOT] NULL is never unknown; CONTAINS/STARTSWITH/ENDSWITH (and NOT variants) are
  false for null, non-strings and an empty search string. AND/OR/NOT are three-valued
  with left-to-right short-circuit. A message matches only if the result is true.
- A bare property as a condition is unknown if missing and false otherwise.
- An AMQP publisher's typed header table: each header is a property of its own, as text
  (`common.field_table.with_header_texts`), so a numeric header compares numerically.
Never I/O, never a protocol.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import ClassVar

from rocketport.common.field_table import AMQP_HEADERS_NEEDLE, with_header_texts
from rocketport.common.message import PROPERTY_TAGS, decode_properties
from rocketport.core.filter.base import FilterError, MessageFilter
from rocketport.core.filter.sql_codegen import Matcher, RawMatcher, compile_matchers
from rocketport.core.filter.sql_parser import parse


@dataclass(frozen=True, slots=True)
class SqlFilter(MessageFilter):
    """A compiled SQL92 subscription: generated matchers (see sql_codegen)."""

    expression_type: ClassVar[str] = "SQL92"

    expression: str
    _match: Matcher = field(repr=False, compare=False)
    _match_raw: RawMatcher = field(repr=False, compare=False)

    @classmethod
    def compile(cls, expression: str | None) -> SqlFilter:
        if expression is None:
            raise FilterError("an SQL92 filter needs an expression", 0)
        match, match_raw = compile_matchers(parse(expression))
        return cls(expression, match, _reading_typed_tables(match, match_raw))

    def match_tags_code(self, tags_code: int) -> bool:
        return True  # tags are only known exactly from the properties

    def match(self, tags: str | None, properties: Mapping[str, str]) -> bool:
        return self._match(with_header_texts(properties), tags)

    @property
    def raw_matcher(self) -> RawMatcher:
        return self._match_raw


def _reading_typed_tables(match: Matcher, match_raw: RawMatcher) -> RawMatcher:
    """``match_raw``, but a record keeping an AMQP typed header table is matched on its
    properties with each header as text (`with_header_texts`), as every reader sees them."""
    needle = AMQP_HEADERS_NEEDLE

    def matcher(raw: bytes) -> bool:
        if needle in raw:
            properties = with_header_texts(decode_properties(raw))
            return match(properties, properties.get(PROPERTY_TAGS))
        return match_raw(raw)
    return matcher
