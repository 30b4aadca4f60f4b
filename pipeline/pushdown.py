"""Spark filters turned into queue pruning, offset ranges and broker-side filters.

Handled fully (never yielded back, so Spark does not re-check them): equality and IN on
`topic` (topics pruned), comparisons, equality and IN on `queue_id` (queues pruned),
comparisons and equality on `offset` (ranges narrowed), equality and IN on `tags` (a tag
expression the broker evaluates), IS NOT NULL on columns that are never null. Narrowed
but yielded back: comparisons on `store_timestamp` (ranges cut where the broker's
timestamp search says; exact while store times grow along each queue, which a wall clock
stepping back would break, so Spark checks them again). Everything else is
yielded back to Spark unchanged.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass, field

from pyspark.sql.datasource import (
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    IsNotNull,
    LessThan,
    LessThanOrEqual,
)

_NEVER_NULL = frozenset({"topic", "queue_id", "offset", "value", "keys", "properties",
                         "born_timestamp", "store_timestamp", "msg_id", "reconsume_times"})


def _us(value: object) -> int | None:
    """A pushed timestamp in epoch microseconds (a naive one is local time, as Spark's)."""
    if isinstance(value, datetime.datetime):
        return round(value.timestamp() * 1_000_000)
    return None


def tag_set(expression: str | None) -> frozenset[str] | None:
    """The tags a tag expression accepts; None for every message."""
    if expression is None or expression.strip() in ("", "*"):
        return None
    return frozenset(t.strip() for t in expression.split("||") if t.strip())


def _narrow(current: set | None, values: set) -> set:
    return values if current is None else current & values


@dataclass(slots=True)
class Pushed:
    """What the pushed filters allow: None means no restriction."""

    topics: set[str] | None = None
    queue_ids: set[int] | None = None
    queue_lo: int = 0  # inclusive
    queue_hi: int | None = None  # exclusive
    offset_lo: int = 0
    offset_hi: int | None = None
    store_lo_ms: int | None = None
    store_hi_ms: int | None = None  # exclusive
    tags: set[str] | None = None
    accepted: list[Filter] = field(default_factory=list)

    def allows_queue(self, queue_id: int) -> bool:
        return ((self.queue_ids is None or queue_id in self.queue_ids) and queue_id >= self.queue_lo
                and (self.queue_hi is None or queue_id < self.queue_hi))

    def take(self, f: Filter) -> bool:
        """Record `f` if it is understood; True when it is handled fully."""
        attr = f.attribute
        if len(attr) != 1:
            return False
        col = attr[0]
        if isinstance(f, IsNotNull):
            return col in _NEVER_NULL
        value = getattr(f, "value", None)
        if col == "topic" and isinstance(f, (EqualTo, In)):
            values = {value} if isinstance(f, EqualTo) else set(value)
            self.topics = _narrow(self.topics, {v for v in values if isinstance(v, str)})
            return True
        if col == "tags" and isinstance(f, (EqualTo, In)):
            values = {value} if isinstance(f, EqualTo) else set(value)
            self.tags = _narrow(self.tags, {v for v in values if isinstance(v, str)})
            return True
        if col in ("queue_id", "offset"):
            return self._take_int(col, f, value)
        if col == "store_timestamp":
            us = _us(value)
            if us is not None:  # a message stored at m ms has the timestamp m * 1000 us
                floor_ms, ceil_ms = us // 1000, -(-us // 1000)
                if isinstance(f, (GreaterThan, GreaterThanOrEqual)):
                    lo = floor_ms + 1 if isinstance(f, GreaterThan) else ceil_ms
                    self.store_lo_ms = lo if self.store_lo_ms is None else max(self.store_lo_ms, lo)
                elif isinstance(f, (LessThan, LessThanOrEqual)):
                    hi = ceil_ms if isinstance(f, LessThan) else floor_ms + 1
                    self.store_hi_ms = hi if self.store_hi_ms is None else min(self.store_hi_ms, hi)
            return False  # store times only grow along a queue, but a clock may step back
        return False

    def _take_int(self, col: str, f: Filter, value: object) -> bool:
        if isinstance(f, In):
            if col != "queue_id" or not all(isinstance(v, int) for v in value):
                return False
            self.queue_ids = _narrow(self.queue_ids, set(value))
            return True
        if not isinstance(value, int) or isinstance(value, bool):
            return False
        lo, hi = {EqualTo: (value, value + 1), GreaterThan: (value + 1, None),
                  GreaterThanOrEqual: (value, None), LessThan: (None, value),
                  LessThanOrEqual: (None, value + 1)}.get(type(f), (None, None))
        if lo is None and hi is None:
            return False
        if col == "queue_id":
            if lo is not None:
                self.queue_lo = max(self.queue_lo, lo)
            if hi is not None:
                self.queue_hi = hi if self.queue_hi is None else min(self.queue_hi, hi)
        else:
            if lo is not None:
                self.offset_lo = max(self.offset_lo, lo)
            if hi is not None:
                self.offset_hi = hi if self.offset_hi is None else min(self.offset_hi, hi)
        return True

    def broker_filter(self, tags: str | None, sql: str | None) -> tuple[str | None, str | None, bool]:
        """(tag expression, SQL92 expression, anything can match) for the options' `tags`
        and `sql` narrowed by the pushed tags."""
        allowed = tag_set(tags)
        if self.tags is not None:
            allowed = self.tags if allowed is None else allowed & self.tags
        if allowed is not None and not allowed:
            return None, None, False
        if sql:
            if allowed is not None:
                quoted = ", ".join("'" + t.replace("'", "''") + "'" for t in sorted(allowed))
                sql = f"({sql}) AND (TAGS IN ({quoted}))"
            return None, sql, True
        return (" || ".join(sorted(allowed)) if allowed is not None else None), None, True
