"""Front-end state that the core does not hold, shown by `rocketport admin` and the console.

A front-end registers a snapshot function under a name (AMQP's exchanges and queues as
``"amqp"``); a reader asks for it by name and gets JSON-able data made at that moment.
The core never interprets it: it only keeps the functions, one per name.

It also keeps which topics may hold AMQP header tables kept whole (`PROPERTY_AMQP_HEADERS`,
whose headers other readers get as text): the AMQP front-end names its exchanges' and
queues' topics, and a RocketMQ pull of such a topic (or of a retry or dead-letter topic,
where copies of any message go) looks into its records; a pull of any other topic sends
the store's bytes untouched.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

JsonObject = dict[str, Any]
Snapshot = Callable[[], JsonObject]


_COPIES = ("%RETRY%", "%DLQ%")  # retry and dead-letter topics: copies of any topic's messages


class FrontEndViews:
    def __init__(self) -> None:
        self._snapshots: dict[str, Snapshot] = {}
        self._table_topics: set[str] = set()

    def note_header_tables(self, topic: str) -> None:
        """``topic`` may hold messages with a kept AMQP header table (kept for the process)."""
        self._table_topics.add(topic)

    def may_hold_header_tables(self, topic: str) -> bool:
        return topic in self._table_topics or topic.startswith(_COPIES)

    def register(self, name: str, snapshot: Snapshot) -> None:
        """ValueError when another front-end holds the name already."""
        if name in self._snapshots:
            raise ValueError(f"a front-end view named {name!r} is registered already")
        self._snapshots[name] = snapshot

    def names(self) -> list[str]:
        return sorted(self._snapshots)

    def snapshot(self, name: str) -> JsonObject:
        """The named view now; KeyError when no front-end registered it."""
        return self._snapshots[name]()
