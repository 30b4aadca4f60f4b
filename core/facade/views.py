"""Front-end state that the core does not hold, shown by `rocketport admin` and the console.

A front-end registers a snapshot function under a name (AMQP's exchanges and queues as
``"amqp"``); a reader asks for it by name and gets JSON-able data made at that moment.
The core never interprets it: it only keeps the functions, one per name.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

JsonObject = dict[str, Any]
Snapshot = Callable[[], JsonObject]


class FrontEndViews:
    def __init__(self) -> None:
        self._snapshots: dict[str, Snapshot] = {}

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
