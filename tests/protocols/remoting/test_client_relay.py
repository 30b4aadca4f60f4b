"""Admin requests the broker passes on to a consumer (307, 309), end to end: a live broker,
a native PushConsumer, and `rocketport admin` run as the CLI (subprocess) while the
consumer keeps serving on the test's event loop."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections.abc import Callable

import orjson
import pytest

from rocketport.client import AdminClient, ConsumeResult, Message, Producer, PushConsumer
from rocketport.client.transport import Connection
from rocketport.protocols.remoting import RemotingCommand, RequestCode
from rocketport.protocols.remoting.bodies import ConsumerData, HeartbeatData, SubscriptionData, encode_body
from rocketport.protocols.remoting.mq_tables import MessageQueueKey
from rocketport.protocols.remoting.running_info import (
    CMResult,
    ConsumeMessageDirectlyResult,
    decode_direct_result,
    decode_running_info,
    encode_direct_result,
    encode_running_info,
)
from tests.support.aio import run


def admin(namesrv: str, *args: str, expect: int = 0) -> str:
    """stdout of the CLI (stderr when a failure is expected)."""
    env = dict(os.environ, COLUMNS="400", TERM="dumb")
    proc = subprocess.run([sys.executable, "-m", "rocketport", "admin", args[0], "-n", namesrv, *args[1:]],
                          env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == expect, proc.stdout + proc.stderr
    return proc.stdout if expect == 0 else proc.stderr


async def admin_json(namesrv: str, *args: str) -> object:
    """The CLI's --output json document, run in a thread so this loop's consumer answers."""
    return orjson.loads(await asyncio.to_thread(admin, namesrv, *args, "--output", "json"))


async def until(predicate: Callable[[], bool], timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.05)


@pytest.mark.timeout(180)
def test_consumer_status_progress_and_direct_consumption(live_broker):
    ns = live_broker.namesrv

    async def main():
        async with AdminClient(ns) as tools:
            await tools.create_topic("RelayTopic", queue_nums=4)
        got: list = []
        mode = {"raise": False}

        async def listener(msgs):
            got.extend(msgs)
            if mode["raise"]:
                raise RuntimeError("listener refuses")
            return ConsumeResult.SUCCESS

        consumer = PushConsumer("RelayGroup", ns, consume_from="first")
        consumer.subscribe("RelayTopic", "TagA || TagB")
        consumer.register(listener)
        async with consumer, Producer(ns, "RelayProducer") as producer:
            cid = consumer.runtime.client_id
            sent = await producer.send(Message("RelayTopic", b"first", tags="TagA"))
            await until(lambda: consumer.process_queue_info(sent.queue) is not None
                        and consumer.process_queue_info(sent.queue).commit_offset == sent.queue_offset + 1)

            # every client in summary: this one, holding every queue of the topic and the retry queue
            summary = await admin_json(ns, "consumerStatus", "-g", "RelayGroup")
            [row] = summary["clients"]
            assert row["clientId"] == cid and row["queues"] == len(consumer.assigned), summary
            assert row["consumeType"] == "CONSUME_PASSIVELY" and row["orderly"] is False, row
            assert "RelayTopic:TagA || TagB" in row["subscriptions"], row
            assert "Same subscription in the same group of consumer" in [a["finding"] for a in summary["analysis"]]

            # one client in detail: its queues as the consumer holds them, and its subscription
            detail = await admin_json(ns, "consumerStatus", "-g", "RelayGroup", "-i", cid)
            properties = {p["key"]: p["value"] for p in detail["properties"]}
            assert properties["consumerGroup"] == "RelayGroup" and properties["messageModel"] == "CLUSTERING"
            assert {"topic": "RelayTopic", "expressionType": "TAG", "subExpression": "TagA || TagB"} \
                in detail["subscriptions"], detail["subscriptions"]
            held = {(q["topic"], q["queueId"]): q for q in detail["queues"]}
            assert {mq.queue_id for mq in consumer.assigned if mq.topic == "RelayTopic"} == \
                {qid for topic, qid in held if topic == "RelayTopic"} == {0, 1, 2, 3}
            for mq in consumer.assigned:
                assert held[(mq.topic, mq.queue_id)]["commitOffset"] == consumer.process_queue_info(mq).commit_offset
            assert held[("RelayTopic", sent.queue.queue_id)]["commitOffset"] == sent.queue_offset + 1
            # the consume status: the pull that brought "first" and the listener call that took it
            status = {s["topic"]: s for s in detail["status"]}["RelayTopic"]
            assert status["pullTPS"] > 0 and status["pullRT"] >= 0 and status["consumeOKTPS"] > 0, status
            assert status["consumeFailedTPS"] == 0 and status["consumeFailedMsgs"] == 0, status

            # consumerProgress -s: each queue's client IP, from the running info
            progress = await admin_json(ns, "consumerProgress", "-g", "RelayGroup", "-t", "RelayTopic", "-s")
            assert {r["clientIP"] for r in progress["progress"]} == {consumer.runtime.ip}, progress

            # queryMsgByUniqueKey -g -d: the listener gets the message again and says how it went
            target = await producer.send(Message("RelayTopic", b"direct", tags="TagB"))
            await until(lambda: [m.msg_id for m in got].count(target.msg_id) == 1)
            result = await admin_json(ns, "queryMsgByUniqueKey", "-i", target.msg_id, "-t", "RelayTopic",
                                      "-g", "RelayGroup", "-d", cid)
            assert result["consumeResult"] == "CR_SUCCESS" and result["order"] is False, result
            again = [m for m in got if m.msg_id == target.msg_id]
            assert len(again) == 2 and again[1].body == b"direct" and again[1].tags == "TagB", again
            assert "CR_SUCCESS" in await asyncio.to_thread(
                admin, ns, "queryMsgByUniqueKey", "-i", target.msg_id, "-t", "RelayTopic",
                "-g", "RelayGroup", "-d", cid, "--output", "table")
            mode["raise"] = True
            failed = await admin_json(ns, "queryMsgByUniqueKey", "-i", target.msg_id, "-t", "RelayTopic",
                                      "-g", "RelayGroup", "-d", cid)
            assert failed["consumeResult"] == "CR_THROW_EXCEPTION" and "listener refuses" in failed["remark"]
            refused = await producer.send(Message("RelayTopic", b"refused", tags="TagA"))
            await until(lambda: any(m.msg_id == refused.msg_id for m in got))
            await until(lambda: consumer.stats.status("RelayTopic")["consumeFailedMsgs"] >= 1)
            detail = await admin_json(ns, "consumerStatus", "-g", "RelayGroup", "-i", cid)
            status = {s["topic"]: s for s in detail["status"]}["RelayTopic"]
            assert status["consumeFailedMsgs"] >= 1 and status["consumeFailedTPS"] > 0, status

            # a client id the broker does not know: a clear error, for both verbs
            err = await asyncio.to_thread(admin, ns, "consumerStatus", "-g", "RelayGroup",
                                          "-i", "10.9.9.9@nobody#0", expect=1)
            assert "The Consumer <RelayGroup> <10.9.9.9@nobody#0> not online" in err, err
            err = await asyncio.to_thread(admin, ns, "queryMsgByUniqueKey", "-i", target.msg_id,
                                          "-t", "RelayTopic", "-g", "RelayGroup", "-d", "10.9.9.9@nobody#0",
                                          expect=1)
            assert "not online" in err, err
        # the consumer shut down (unregistered): no longer online
        err = await asyncio.to_thread(admin, ns, "consumerStatus", "-g", "RelayGroup", "-i", cid, expect=1)
        assert "not online" in err, err

    run(main())


async def silent_consumer(addr: str, group: str, client_id: str,
                          asked: asyncio.Event) -> Connection:
    """A consumer connection that heartbeats and never answers what the broker asks it;
    `asked` is set when a request arrives."""
    def on_request(conn: Connection, command: RemotingCommand) -> None:
        if command.code == RequestCode.GET_CONSUMER_RUNNING_INFO:
            asked.set()

    conn = await Connection.open(addr, on_request)
    body = encode_body(HeartbeatData(client_id, consumer_data_set=[
        ConsumerData(group, subscription_data_set=[SubscriptionData("SilentTopic")])]))
    response = await conn.invoke(RemotingCommand(RequestCode.HEART_BEAT, body=body))
    assert response.code == 0, response.remark
    return conn


@pytest.mark.timeout(120)
def test_a_consumer_that_does_not_answer_or_goes_away_gets_an_error(live_broker):
    ns = live_broker.namesrv

    async def main():
        async with AdminClient(ns) as tools:
            await tools.create_topic("SilentTopic", queue_nums=1)
        # connected but silent: the broker stops waiting (10 s) and says so, the admin exits
        asked = asyncio.Event()
        conn = await silent_consumer(live_broker.addr, "SilentGroup", "10.1.1.1@silent", asked)
        try:
            err = await asyncio.to_thread(admin, ns, "consumerStatus", "-g", "SilentGroup",
                                          "-i", "10.1.1.1@silent", expect=1)
        finally:
            conn.close()
        assert asked.is_set()
        assert "code 207" in err and "consumer <SilentGroup> <10.1.1.1@silent> Timeout" in err, err

        # gone while the broker waits for it: the connection's close ends the wait at once
        asked = asyncio.Event()
        conn = await silent_consumer(live_broker.addr, "SilentGroup", "10.1.1.2@leaving", asked)
        waiting = asyncio.create_task(asyncio.to_thread(
            admin, ns, "consumerStatus", "-g", "SilentGroup", "-i", "10.1.1.2@leaving", expect=1))
        await asyncio.wait_for(asked.wait(), 30)
        conn.close()
        err = await waiting
        assert "code 1" in err and "invoke consumer <SilentGroup> <10.1.1.2@leaving> Exception" in err, err

    run(main())


def test_running_info_as_the_java_client_writes_it():
    """A ConsumerRunningInfo in fastjson's shape (MessageQueue objects as mqTable keys,
    `droped`, an enum property) reads as ours writes it, and ours reads back whole."""
    java = (b'{"jstack":null,"mqTable":{{"brokerName":"broker-a","queueId":1,"topic":"T"}:'
            b'{"cachedMsgCount":2,"cachedMsgMaxOffset":9,"cachedMsgMinOffset":8,"cachedMsgSizeInMiB":0,'
            b'"commitOffset":8,"droped":true,"lastConsumeTimestamp":1700000000000,"lastLockTimestamp":0,'
            b'"lastPullTimestamp":1700000000001,"locked":false,"transactionMsgCount":0,'
            b'"transactionMsgMaxOffset":0,"transactionMsgMinOffset":0,"tryUnlockTimes":0}},'
            b'"properties":{"PROP_CONSUME_TYPE":"CONSUME_PASSIVELY","PROP_CONSUMEORDERLY":"false",'
            b'"consumerGroup":"G","pullBatchSize":32},'
            b'"statusTable":{"T":{"consumeFailedMsgs":0,"consumeFailedTPS":0.0,"consumeOKTPS":1.5,'
            b'"consumeRT":2.0,"pullRT":1.0,"pullTPS":3.0}},'
            b'"subscriptionSet":[{"classFilterMode":false,"codeSet":[65],"expressionType":"TAG",'
            b'"subString":"A","subVersion":1700000000000,"tagsSet":["A"],"topic":"T"}]}')
    info = decode_running_info(java)
    [(mq, pq)] = info.mq_table.items()
    assert mq == MessageQueueKey("T", "broker-a", 1) and pq.dropped and pq.cached_msg_count == 2
    assert info.properties["pullBatchSize"] == "32" and info.status_table["T"]["consumeOKTPS"] == 1.5
    assert [(s.topic, s.sub_string, s.tags_set) for s in info.subscription_set] == [("T", "A", ["A"])]
    assert decode_running_info(encode_running_info(info)) == info
    assert b'"droped":true' in encode_running_info(info)
    result = ConsumeMessageDirectlyResult(True, True, CMResult.CR_LATER, "x", 7)
    assert decode_direct_result(b'{"autoCommit":true,"consumeResult":"CR_LATER","order":true,'
                                b'"remark":"x","spentTimeMills":7}') == result
    assert decode_direct_result(encode_direct_result(result)) == result
