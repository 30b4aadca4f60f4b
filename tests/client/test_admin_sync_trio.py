"""AdminClient, the blocking `rocketport.client.sync` wrappers, and use from Trio."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from rocketport.client import AdminClient, ClientError, Message, MessageQueue, Producer
from rocketport.client import sync
from rocketport.protocols.remoting import ResponseCode
from tests.support.aio import run


def test_admin_topics_offsets_and_lookups(broker):
    async def main():
        async with AdminClient(broker.namesrv) as admin:
            info = await admin.cluster_info()
            assert list(info.broker_addr_table) == ["broker-a"]
            assert await admin.create_topic("Managed", queue_nums=3) == [broker.addr]
            assert "Managed" in await admin.topic_list()
            route = await admin.topic_route("Managed")
            assert [(q.read_queue_nums, q.write_queue_nums) for q in route.queue_datas] == [(3, 3)]
            q0 = MessageQueue("Managed", "broker-a", 0)
            async with Producer(broker.namesrv, "PG") as producer:
                sent = [await producer.send(Message("Managed", b"m%d" % i, keys=f"key{i}"), queue=q0)
                        for i in range(3)]
            assert (await admin.min_offset(q0), await admin.max_offset(q0)) == (0, 3)
            viewed = await admin.view_message(sent[1].offset_msg_id)
            assert (viewed.body, viewed.keys, viewed.msg_id) == (b"m1", ["key1"], sent[1].msg_id)
            found = await admin.query_by_key("Managed", "key2")
            assert [m.body for m in found] == [b"m2"]
            await admin.create_group("ManagedGroup", retry_max_times=3)
            assert broker.call(lambda: broker.server.broker.get_group("ManagedGroup")).retry_max_times == 3
            assert await admin.committed_offset("ManagedGroup", q0) in (-1, 0)
            await admin.reset_offset_by_time("ManagedGroup", "Managed", 0)
            await admin.delete_topic("Managed")
            with pytest.raises(ClientError) as missing:
                await admin.topic_route("Managed")
            assert missing.value.code == ResponseCode.TOPIC_NOT_EXIST
    run(main())


def test_sync_wrappers_without_an_event_loop(broker):
    got: list = []
    done = threading.Event()

    def listener(msgs):
        got.extend(m.body for m in msgs)
        if len(got) >= 5:
            done.set()
        return sync.ConsumeResult.SUCCESS

    with sync.Producer(broker.namesrv, "PG") as producer:
        results = [producer.send(sync.Message("Scripted", b"s%d" % i)) for i in range(5)]
        assert all(r.status is sync.SendStatus.SEND_OK for r in results)
    consumer = sync.PushConsumer("ScriptGroup", broker.namesrv, consume_from="first")
    consumer.subscribe("Scripted")
    consumer.register(listener)
    with consumer:
        assert done.wait(20)
    assert sorted(got) == [b"s%d" % i for i in range(5)]
    with sync.PullConsumer("ScriptPull", broker.namesrv, consume_from="first") as puller:
        puller.assign(puller.queues("Scripted"))
        polled: list = []
        deadline = time.monotonic() + 10
        while len(polled) < 5 and time.monotonic() < deadline:
            polled += puller.poll(timeout_s=0.2)
        assert sorted(m.body for m in polled) == sorted(got)
    with sync.AdminClient(broker.namesrv) as admin:
        assert "Scripted" in admin.topic_list()


# Run in a child interpreter: importing trio_asyncio installs its event-loop policy for the
# whole process, which would change the loop every later test runs on.
TRIO_PROGRAM = textwrap.dedent('''
    import asyncio, json, sys
    import trio, trio_asyncio
    from rocketport.client import ConsumeResult, Message, Producer, PushConsumer

    @trio_asyncio.aio_as_trio
    async def roundtrip(namesrv):
        got = []

        async def listener(msgs):
            got.extend(msgs)
            return ConsumeResult.SUCCESS

        async with Producer(namesrv, "PG") as producer:
            result = await producer.send(Message("FromTrio", b"hi trio", tags="t"))
        consumer = PushConsumer("TrioGroup", namesrv, consume_from="first")
        consumer.subscribe("FromTrio")
        consumer.register(listener)
        async with consumer:
            for _ in range(200):
                if got:
                    break
                await asyncio.sleep(0.05)
        return result.msg_id, [(m.body.decode(), m.tags, m.msg_id) for m in got]

    async def main():
        async with trio_asyncio.open_loop():
            with trio.fail_after(30):
                print(json.dumps(await roundtrip(sys.argv[1])))

    trio.run(main)
''')


def test_trio_through_trio_asyncio(broker):
    proc = subprocess.run([sys.executable, "-c", TRIO_PROGRAM, broker.namesrv], timeout=60,
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    msg_id, got = json.loads(proc.stdout.splitlines()[-1])
    assert got == [["hi trio", "t", msg_id]]
