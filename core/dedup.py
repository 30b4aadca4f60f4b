"""Producer deduplication by key: a message that carries a DEDUP_KEY property already
stored in its topic is not stored again. The messages of one put (a batch) that share a
key are one unit: stored together, or dropped together by a later put of that key.

Why: a writer that retries (a Spark task attempt run again, a streaming micro-batch
replayed after a restart) resends exactly what an earlier attempt may already have stored.
When it names every message (or every batch) with a deterministic key, the broker drops
the repeats, so consumers see each message once. The window is the last `capacity` keys
stored, per broker, in memory: it does not outlive the broker process, and a key older
than the window is not recognised. A put whose key is being stored by a concurrent put
waits for that one: stored, it is a repeat; refused, it is stored. A repeat is answered
with the result of the put that stored the key, so the producer sees a success.

Messages without the property cost nothing here: the produce role sends only messages
whose encoded properties name DEDUP_KEY through `DedupWindow.put`.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Awaitable, Callable

from .message import Message

PROPERTY_DEDUP_KEY = "DEDUP_KEY"
DEDUP_NEEDLE = PROPERTY_DEDUP_KEY.encode() + b"\x01"  # found in encoded properties
DEFAULT_CAPACITY = 100_000  # keys kept (~15 MB); a batch of messages may share one key

Key = tuple[str, str]  # (topic, key)


def dedup_key(msg: Message) -> str | None:
    return msg.properties.get(PROPERTY_DEDUP_KEY) if msg.properties else None


class DedupWindow:
    def __init__(self, capacity: int = DEFAULT_CAPACITY) -> None:
        self.capacity = capacity
        self._stored: OrderedDict[Key, object] = OrderedDict()  # key -> the put's result
        self._pending: dict[Key, asyncio.Future] = {}
        self.dropped = 0  # messages not stored because their key was

    def __contains__(self, key: Key) -> bool:
        return key in self._stored

    async def put(self, msgs: list[Message], store: Callable[[list[Message]], Awaitable[object]]) -> object:
        """Store through `store` the messages of `msgs` whose key is not stored yet (and
        those without a key); the result of `store`, or, when every message is a repeat,
        the result of the put that stored the first one's key."""
        fresh: list[Message] = []
        claimed: list[Key] = []
        earlier: object = None
        for msg in msgs:
            key = dedup_key(msg)
            if key is None:
                fresh.append(msg)
                continue
            k = (msg.topic, key)
            if k in claimed:  # messages of one put sharing a key are one unit: all kept
                fresh.append(msg)
                continue
            while (waiting := self._pending.get(k)) is not None:
                await asyncio.shield(waiting)  # a concurrent put of this key: its outcome decides
            if k in self._stored:
                self.dropped += 1
                if earlier is None:
                    earlier = self._stored[k]
                continue
            self._pending[k] = asyncio.get_running_loop().create_future()
            claimed.append(k)
            fresh.append(msg)
        if not fresh:
            return earlier
        try:
            result = await store(fresh)
        except BaseException:
            self._settle(claimed, None)
            raise
        self._settle(claimed, result)
        return result

    def _settle(self, claimed: list[Key], result: object) -> None:
        stored = self._stored
        for k in claimed:
            if result is not None:
                stored[k] = result
                stored.move_to_end(k)
            self._pending.pop(k).set_result(None)
        while len(stored) > self.capacity:
            stored.popitem(last=False)
