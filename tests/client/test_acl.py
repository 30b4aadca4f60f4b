"""The native client against a broker with aclEnable: every request signed with the
credentials given, what the account may not do refused as a typed error."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest

from rocketport.client import ClientError, ConsumeResult, Message, Producer, PushConsumer
from rocketport.protocols.remoting import ResponseCode
from tests.support.aio import run
from tests.support.live_broker import start_live_broker
from tests.support.remoting import ACL_FILE

APP = ("app", "app-secret")


@pytest.fixture
def acl_broker(client_config, tmp_path):
    path = tmp_path / "plain_acl.yml"
    path.write_text(ACL_FILE)
    live = start_live_broker(dataclasses.replace(client_config, acl_enable=True,
                                                 plain_acl_file=str(path)))
    try:
        for topic in ("Open", "Closed"):
            live.call(lambda t=topic: live.server.broker.create_topic(t, read_queue_nums=2,
                                                                      write_queue_nums=2))
        yield live
    finally:
        live.stop()


def test_signed_sends_and_consumption(acl_broker):
    async def main():
        async with Producer(acl_broker.namesrv, "AclPG", credentials=APP) as producer:
            await producer.send(Message("Open", b"single", tags="T"))
            await producer.send_batch([Message("Open", b"b%d" % i) for i in range(3)])
            with pytest.raises(ClientError) as refused:
                await producer.send(Message("Closed", b"nope"))
            assert refused.value.code == ResponseCode.SYSTEM_ERROR
            assert "AclException" in refused.value.remark
        async with Producer(acl_broker.namesrv, "AclPG") as unsigned:
            with pytest.raises(ClientError):
                await unsigned.send(Message("Open", b"unsigned"))
        got: list = []
        done = asyncio.Event()

        async def listener(msgs):
            got.extend(m.body for m in msgs)
            if len(got) >= 4:
                done.set()
            return ConsumeResult.SUCCESS

        consumer = PushConsumer("AclGroup", acl_broker.namesrv, consume_from="first", credentials=APP)
        consumer.subscribe("Open")
        consumer.register(listener)
        async with consumer:
            await asyncio.wait_for(done.wait(), 20)
        assert sorted(got) == sorted([b"single", b"b0", b"b1", b"b2"])
    run(main())
