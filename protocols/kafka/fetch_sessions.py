"""Incremental fetch sessions (KIP-227): a consumer of many partitions stops resending them.

A Fetch v7+ with epoch 0 is a *full* fetch: it names every partition, and the broker answers
all of them and opens a session (a new ``session_id``, next epoch 1) remembering each
partition's fetch offset and limit and the high watermark, last stable offset and log start
it last answered. Later *incremental* fetches carry the session id and epoch and name only
partitions whose fetch offset or limit changed (and ``forgotten_topics_data`` to drop some);
the answer carries only partitions with records, an error or a changed watermark or log
start. Epoch -1 is sessionless (and closes a session named with it): librdkafka always
fetches that way; kafka-python and the Java client use sessions.

The cache follows Kafka's FetchSessionCache: at most ``max.incremental.fetch.session.cache.slots``
sessions (0 turns sessions off: every fetch is answered sessionless); when full, a new
session takes the slot of one unused for ``min.incremental.fetch.session.eviction.ms``
(120 s), else of the session with the fewest partitions among those older than that, if the
new one has more; otherwise it gets no session (session id 0) and the client goes on with
full fetches. An unknown session id is FETCH_SESSION_ID_NOT_FOUND and a wrong epoch
INVALID_FETCH_SESSION_EPOCH (the client then starts over with a full fetch).

Sans-IO: this module rewrites a request before FetchHandler reads it and filters the
response after; it never reads the store or touches a socket.
"""

from __future__ import annotations

import random
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

from .errors import ErrorCode

INVALID_SESSION_ID: Final = 0
INITIAL_EPOCH: Final = 0
FINAL_EPOCH: Final = -1
EVICTION_MS: Final = 120_000  # Kafka's min.incremental.fetch.session.eviction.ms
DEFAULT_SLOTS: Final = 1000  # Kafka's max.incremental.fetch.session.cache.slots


@dataclass(slots=True)
class CachedPartition:
    fetch_offset: int
    partition_max_bytes: int
    log_start_offset: int  # the client's (followers); echoed back in the rebuilt request
    high_watermark: int = -1  # what the session last answered
    last_stable_offset: int = -1
    log_start: int = -1

    def changed(self, out: dict[str, Any]) -> bool:
        """Whether a partition's answer must be sent, noting what it tells (Kafka's
        maybeUpdateResponseData): records, an error, a moved watermark or log start."""
        must = bool(out["records"]) or out["error_code"] != ErrorCode.NONE
        if out["error_code"] != ErrorCode.NONE:
            self.high_watermark = -1  # sent again once the error clears
        elif (out["high_watermark"], out["last_stable_offset"], out["log_start_offset"]) != \
                (self.high_watermark, self.last_stable_offset, self.log_start):
            self.high_watermark = out["high_watermark"]
            self.last_stable_offset = out["last_stable_offset"]
            self.log_start = out["log_start_offset"]
            must = True
        return must


@dataclass(slots=True)
class FetchSession:
    session_id: int
    epoch: int
    created_ms: int
    last_used_ms: int
    partitions: dict[tuple[str, int], CachedPartition] = field(default_factory=dict)
    topics: list[dict[str, Any]] | None = None  # the expanded request's topics, until a partition changes


@dataclass(slots=True)
class SessionFetch:
    """One Fetch through the session layer: the request to read, and how to answer it."""

    request: dict[str, Any]  # the full partition list to read (an incremental one expanded)
    session: FetchSession | None  # the incremental fetch's session
    full: bool  # a full fetch that may open a session (epoch 0)


class FetchSessionCache:
    """The broker's sessions, bounded, with Kafka's eviction rule."""

    def __init__(self, max_slots: int = DEFAULT_SLOTS, eviction_ms: int = EVICTION_MS,
                 clock_ms: Callable[[], int] | None = None) -> None:
        self.max_slots = max_slots
        self.eviction_ms = eviction_ms
        self.clock_ms = clock_ms or (lambda: time.monotonic_ns() // 1_000_000)
        self.sessions: OrderedDict[int, FetchSession] = OrderedDict()  # least recently used first
        self.created = self.evicted = 0

    def __len__(self) -> int:
        return len(self.sessions)

    # ------------------------------------------------------------------ before the read
    def begin(self, body: dict[str, Any]) -> SessionFetch | ErrorCode:
        """Open the request against the cache: an error code for a bad session id or epoch."""
        session_id, epoch = body["session_id"], body["session_epoch"]
        if epoch in (INITIAL_EPOCH, FINAL_EPOCH):
            if session_id != INVALID_SESSION_ID:  # a full fetch closes the session it names
                self.sessions.pop(session_id, None)
            return SessionFetch(body, None, epoch == INITIAL_EPOCH and self.max_slots > 0)
        session = self.sessions.get(session_id)
        if session is None:
            return ErrorCode.FETCH_SESSION_ID_NOT_FOUND
        if session.epoch != epoch:
            return ErrorCode.INVALID_FETCH_SESSION_EPOCH
        parts = session.partitions
        if body["topics"] or body["forgotten_topics_data"]:
            session.topics = None
        for t in body["topics"]:
            for p in t["partitions"]:
                key = (t["topic"], p["partition"])
                cached = parts.get(key)
                if cached is None:
                    parts[key] = CachedPartition(p["fetch_offset"], p["partition_max_bytes"], p["log_start_offset"])
                else:
                    cached.fetch_offset = p["fetch_offset"]
                    cached.partition_max_bytes = p["partition_max_bytes"]
                    cached.log_start_offset = p["log_start_offset"]
        for t in body["forgotten_topics_data"]:
            for index in t["partitions"]:
                parts.pop((t["topic"], index), None)
        if not parts:  # nothing left to fetch: the session ends, the answer is sessionless
            del self.sessions[session_id]
            return SessionFetch({**body, "topics": []}, None, False)
        session.epoch = _next_epoch(epoch)
        self._touch(session)
        if session.topics is None:  # a consumer caught up sends empty requests: built once for them
            by_topic: dict[str, list[dict[str, Any]]] = {}
            for (topic, index), cached in parts.items():
                by_topic.setdefault(topic, []).append(
                    {"partition": index, "current_leader_epoch": -1, "fetch_offset": cached.fetch_offset,
                     "last_fetched_epoch": -1, "log_start_offset": cached.log_start_offset,
                     "partition_max_bytes": cached.partition_max_bytes})
            session.topics = [{"topic": topic, "partitions": ps} for topic, ps in by_topic.items()]
        return SessionFetch({**body, "topics": session.topics}, session, False)

    # ------------------------------------------------------------------ after the read
    def finish(self, fetch: SessionFetch, response: dict[str, Any]) -> dict[str, Any]:
        """The answer to send: a full fetch opens a session (when a slot is free), an
        incremental one keeps only the partitions that changed."""
        if fetch.session is not None:
            session = fetch.session
            if self.sessions.get(session.session_id) is not session:  # closed while the read waited
                return response
            parts = session.partitions
            kept_topics = []
            for t in response["responses"]:
                kept = [out for out in t["partitions"]
                        if (cached := parts.get((t["topic"], out["partition_index"]))) is None or cached.changed(out)]
                if kept:
                    kept_topics.append({"topic": t["topic"], "partitions": kept})
            response["responses"] = kept_topics
            response["session_id"] = session.session_id
            return response
        if fetch.full:
            size = sum(len(t["partitions"]) for t in fetch.request["topics"])
            session = self._create(size)
            if session is not None:
                for t, t_out in zip(fetch.request["topics"], response["responses"]):
                    for p, out in zip(t["partitions"], t_out["partitions"]):
                        cached = CachedPartition(p["fetch_offset"], p["partition_max_bytes"], p["log_start_offset"])
                        cached.changed(out)
                        session.partitions[(t["topic"], p["partition"])] = cached
                response["session_id"] = session.session_id
        return response

    # ------------------------------------------------------------------ the cache
    def _create(self, size: int) -> FetchSession | None:
        now = self.clock_ms()
        if len(self.sessions) >= self.max_slots and not self._evict_for(size, now):
            return None
        session_id = INVALID_SESSION_ID
        while session_id == INVALID_SESSION_ID or session_id in self.sessions:
            session_id = random.randint(1, 0x7FFFFFFF)
        session = self.sessions[session_id] = FetchSession(session_id, 1, now, now)
        self.created += 1
        return session

    def _evict_for(self, size: int, now: int) -> bool:
        """Free a slot for a new session of ``size`` partitions, as Kafka's tryEvict does."""
        if not self.sessions:
            return False
        oldest_id, oldest = next(iter(self.sessions.items()))
        if now - oldest.last_used_ms > self.eviction_ms:  # a stale session goes first
            victim = oldest_id
        else:  # else the smallest session past its protection time, if the new one is bigger
            evictable = [(len(s.partitions), s.session_id) for s in self.sessions.values()
                         if now - s.created_ms > self.eviction_ms]
            if not evictable:
                return False
            smallest, victim = min(evictable)
            if size < smallest or (size == smallest and victim > 0):
                return False
        del self.sessions[victim]
        self.evicted += 1
        return True

    def _touch(self, session: FetchSession) -> None:
        session.last_used_ms = self.clock_ms()
        self.sessions.move_to_end(session.session_id)


def _next_epoch(epoch: int) -> int:
    """Kafka's FetchMetadata.nextEpoch: wraps from INT32_MAX to 1."""
    return 1 if epoch >= 0x7FFFFFFF else epoch + 1
