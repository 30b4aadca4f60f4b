"""Subscription filters: compile a TAG or SQL92 expression once, match messages fast.

`compile_filter` is the one entry point front-ends use; the returned `MessageFilter`
offers a cheap ConsumeQueue prefilter (`match_tags_code`) and the exact check (`match`).
Semantics follow Apache RocketMQ (see docs/filters.md). Pure computation: this package
never does I/O and never imports a protocol.
"""

from __future__ import annotations

from functools import lru_cache

from rocketport.core.filter.base import FilterError, MessageFilter
from rocketport.core.filter.sql import SqlFilter
from rocketport.core.filter.tag import TagFilter, parse_tag_expression, tag_filter_codes

EXPRESSION_TYPE_TAG = "TAG"
EXPRESSION_TYPE_SQL92 = "SQL92"


def compile_filter(expression_type: str | None, expression: str | None) -> MessageFilter:
    """Compile a subscription; raises FilterError for a bad expression or unknown type.

    Filters are immutable, so compiled ones are shared: many consumers of one group
    subscribe with the same expression.
    """
    kind = (expression_type or EXPRESSION_TYPE_TAG).upper()
    if kind not in (EXPRESSION_TYPE_TAG, EXPRESSION_TYPE_SQL92):
        raise FilterError(f"unknown expression type {expression_type!r}", 0)
    return _compile(kind, expression)


@lru_cache(maxsize=1024)
def _compile(kind: str, expression: str | None) -> MessageFilter:
    if kind == EXPRESSION_TYPE_TAG:
        return TagFilter.compile(expression)
    return SqlFilter.compile(expression)


__all__ = [
    "EXPRESSION_TYPE_SQL92",
    "EXPRESSION_TYPE_TAG",
    "FilterError",
    "MessageFilter",
    "SqlFilter",
    "TagFilter",
    "compile_filter",
    "parse_tag_expression",
    "tag_filter_codes",
]
