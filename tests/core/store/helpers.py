"""Shared helpers for store tests: run a store inside a fresh event loop."""

import asyncio
import contextlib

from rocketport.core.store.message_store import MessageStore


@contextlib.asynccontextmanager
async def open_store(config):
    store = MessageStore(config)
    store.open()
    await store.start()
    try:
        yield store
    finally:
        await store.stop()


async def crash(store: MessageStore) -> None:
    """Drop a running store without a clean shutdown (abort marker stays, no checkpoint)."""
    store._running = False
    store.index.stop()
    store.flush_service.stop()
    store._stop_event.set()
    await store._services.__aexit__(None, None, None)
    store.close()


def drain(store, topic, queue_id, start=0, batch=64):
    """All (queue offset, body) pairs of a queue from ``start`` through the public get API."""
    out = []
    offset = start
    for _ in range(100_000):
        res = store.get_messages(topic, queue_id, offset, batch)
        if not res.message_count:
            break
        for m in res.messages():
            out.append((m.queue_offset, m.body))
        offset = res.next_begin_offset
    return out


def run(coro):
    return asyncio.run(coro)
