"""The inner-batch sys flag (128) is the store's own: a client that sets it on a plain
message is refused, and a record that claims it with a forged INNER_NUM (a store written
before this rule) is indexed as one entry at recovery, never as INNER_NUM entries."""

from __future__ import annotations

import asyncio
import os
import shutil

import pytest

from rocketport.common.message import INNER_BATCH_FLAG, PROPERTY_INNER_NUM, Message
from rocketport.core.broker import Broker
from rocketport.core.errors import InvalidMessage
from rocketport.core.store.message_store import MessageStore
from tests.support.aio import run


def test_a_client_message_with_the_inner_batch_flag_is_refused(small_config):
    async def main():
        async with Broker(small_config) as broker:
            broker.create_topic("T", read_queue_nums=1, write_queue_nums=1)
            forged = Message("T", b"x", {PROPERTY_INNER_NUM: "1000000"}, queue_id=0,
                             sys_flag=INNER_BATCH_FLAG)
            with pytest.raises(InvalidMessage, match="reserved"):
                await broker.put_message(forged)
            with pytest.raises(InvalidMessage, match="reserved"):
                await broker.put_messages([forged])
            with pytest.raises(InvalidMessage, match="reserved"):
                await broker.put_batch("T", 0, b"", INNER_BATCH_FLAG, 0, ("127.0.0.1", 1), 0)
            assert broker.accept_now("T", 0, b"", INNER_BATCH_FLAG) is None
            assert broker.max_offset("T", 0) == 0
    run(main())


def test_recovery_does_not_trust_a_forged_inner_num(small_config):
    async def main():
        store = MessageStore(small_config)
        store.open()
        await store.start()
        # written straight to the store, as a broker before the rule could have
        await store.put_message(Message("T", b"tiny", {PROPERTY_INNER_NUM: "1000000"}, queue_id=0,
                                        sys_flag=INNER_BATCH_FLAG))
        await store.put_message(Message("T", b"after", queue_id=0))
        await store.stop()
        root = small_config.store_path_root_dir
        shutil.rmtree(os.path.join(root, "consumequeue"))
        os.remove(os.path.join(root, "checkpoint"))
        store = MessageStore(small_config)
        store.open()
        try:
            assert store.max_offset("T", 0) == 2
        finally:
            store.close()
    run(main())
