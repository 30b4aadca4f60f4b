"""Group membership over remoting: heartbeats, NOTIFY_CONSUMER_IDS_CHANGED pushes, the
consumer list, unregistering, a closed connection, and orderly queue locks."""

from __future__ import annotations

import asyncio
import time

import orjson

from rocketport.common.message import Message
from rocketport.protocols.remoting import RemotingCommand, mq_tables
from rocketport.protocols.remoting.client import RemotingClient, request
from rocketport.protocols.remoting.codes import RequestCode, ResponseCode
from rocketport.server import BrokerServer
from tests.support.aio import run as run_async


def heartbeat(client_id: str) -> RemotingCommand:
    return request(RequestCode.HEART_BEAT, body=orjson.dumps({
        "clientID": client_id, "consumerDataSet": [{
            "groupName": "G", "consumeType": "CONSUME_PASSIVELY", "messageModel": "CLUSTERING",
            "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET",
            "subscriptionDataSet": [{"topic": "GT", "subString": "*"}]}]}))


def lock(client_id: str, code: RequestCode = RequestCode.LOCK_BATCH_MQ) -> RemotingCommand:
    return request(code, body=orjson.dumps({
        "consumerGroup": "G", "clientId": client_id,
        "mqSet": [{"topic": "GT", "brokerName": "broker-a", "queueId": 0}]}))


def test_membership_pushes_and_locks(remoting_config):
    async def main() -> None:
        server = BrokerServer(remoting_config)
        await server.start()
        try:
            addr = server.front_ends["remoting"].broker_addr()
            pushes_a: asyncio.Queue[RemotingCommand] = asyncio.Queue()
            async with await RemotingClient.connect(addr, on_request=pushes_a.put_nowait) as a:
                assert (await a.invoke(heartbeat("A"))).code == ResponseCode.SUCCESS
                await asyncio.wait_for(pushes_a.get(), 5)  # its own arrival
                b = await RemotingClient.connect(addr)
                assert (await b.invoke(heartbeat("B"))).code == ResponseCode.SUCCESS
                push = await asyncio.wait_for(pushes_a.get(), 5)
                assert push.code == RequestCode.NOTIFY_CONSUMER_IDS_CHANGED
                assert push.ext_fields["consumerGroup"] == "G"
                resp = await a.invoke(request(RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "G"}))
                assert orjson.loads(bytes(resp.body)) == {"consumerIdList": ["A", "B"]}
                assert server.broker.get_topic("%RETRY%G") is not None

                got = orjson.loads(bytes((await a.invoke(lock("A"))).body))
                assert got == {"lockOKMQSet": [{"topic": "GT", "brokerName": "broker-a", "queueId": 0}]}
                assert orjson.loads(bytes((await b.invoke(lock("B"))).body)) == {"lockOKMQSet": []}
                assert (await a.invoke(lock("A", RequestCode.UNLOCK_BATCH_MQ))).code == ResponseCode.SUCCESS
                assert len(orjson.loads(bytes((await b.invoke(lock("B"))).body))["lockOKMQSet"]) == 1

                await b.close()  # a dropped connection takes its registration along
                push = await asyncio.wait_for(pushes_a.get(), 5)
                assert push.code == RequestCode.NOTIFY_CONSUMER_IDS_CHANGED
                resp = await a.invoke(request(RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "G"}))
                assert orjson.loads(bytes(resp.body)) == {"consumerIdList": ["A"]}
                resp = await a.invoke(request(RequestCode.UNREGISTER_CLIENT,
                                              {"clientID": "A", "consumerGroup": "G"}))
                assert resp.code == ResponseCode.SUCCESS
                resp = await a.invoke(request(RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "G"}))
                assert resp.code == ResponseCode.SYSTEM_ERROR
        finally:
            await server.stop()

    run_async(asyncio.wait_for(main(), 60))


def test_reset_offset_is_pushed_to_online_consumers(remoting_config):
    """INVOKE_BROKER_TO_RESET_OFFSET (222) commits the offsets and pushes
    RESET_CONSUMER_CLIENT_OFFSET (220) with the same ResetOffsetBody to the group's
    online consumers only."""
    async def main() -> None:
        server = BrokerServer(remoting_config)
        await server.start()
        try:
            addr = server.front_ends["remoting"].broker_addr()
            server.broker.create_topic("Reset", read_queue_nums=2, write_queue_nums=2)
            for q in range(2):
                for i in range(3):
                    await server.broker.put_message(Message("Reset", b"m%d" % i, queue_id=q))
            pushes: asyncio.Queue[RemotingCommand] = asyncio.Queue()
            others: asyncio.Queue[RemotingCommand] = asyncio.Queue()
            async with await RemotingClient.connect(addr, on_request=pushes.put_nowait) as member, \
                    await RemotingClient.connect(addr, on_request=others.put_nowait) as outsider:
                assert (await member.invoke(heartbeat("A"))).code == ResponseCode.SUCCESS
                await asyncio.wait_for(pushes.get(), 5)  # its own arrival (40)
                future = int(time.time() * 1000) + 60_000
                answer = await outsider.invoke(request(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, {
                    "topic": "Reset", "group": "G", "timestamp": str(future), "isForce": "true"}))
                assert answer.code == ResponseCode.SUCCESS
                push = await asyncio.wait_for(pushes.get(), 5)
                assert push.code == RequestCode.RESET_CONSUMER_CLIENT_OFFSET
                assert push.ext_fields == {"topic": "Reset", "group": "G", "timestamp": str(future),
                                           "isForce": "true"}
                assert bytes(push.body) == bytes(answer.body)
                table = mq_tables.loads(bytes(push.body))["offsetTable"]
                assert sorted((k.queue_id, v) for k, v in table.items()) == [(0, 3), (1, 3)]
                assert server.broker.query_offset("G", "Reset", 1) == 3
                assert others.empty()
        finally:
            await server.stop()
    run_async(main())


def test_topic_consume_by_who_and_clone_group_offset(remoting_config):
    """QUERY_TOPIC_CONSUME_BY_WHO (300) names groups online on the topic and groups with
    offsets on it; CLONE_GROUP_OFFSET (314) copies a group's offsets, for one topic or all."""
    async def main() -> None:
        server = BrokerServer(remoting_config)
        await server.start()
        try:
            broker = server.broker
            for topic in ("Who", "Other"):
                broker.create_topic(topic, read_queue_nums=2, write_queue_nums=2)
                broker.commit_offset("Committed", topic, 1, 7)
            broker.commit_offset("Committed", "Gone", 0, 1)  # a topic that no longer exists
            async with await RemotingClient.connect(server.front_ends["remoting"].broker_addr()) as client:
                assert (await client.invoke(heartbeat("A"))).code == ResponseCode.SUCCESS  # G on GT only
                online = request(RequestCode.HEART_BEAT, body=orjson.dumps({
                    "clientID": "B", "consumerDataSet": [{
                        "groupName": "Online", "consumeType": "CONSUME_PASSIVELY",
                        "messageModel": "CLUSTERING", "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET",
                        "subscriptionDataSet": [{"topic": "Who", "subString": "*"}]}]}))
                assert (await client.invoke(online)).code == ResponseCode.SUCCESS
                who = await client.invoke(request(RequestCode.QUERY_TOPIC_CONSUME_BY_WHO, {"topic": "Who"}))
                assert who.code == ResponseCode.SUCCESS
                assert orjson.loads(bytes(who.body)) == {"groupList": ["Committed", "Online"]}
                one = await client.invoke(request(RequestCode.CLONE_GROUP_OFFSET, {
                    "srcGroup": "Committed", "destGroup": "CopyOne", "topic": "Who", "offline": "false"}))
                every = await client.invoke(request(RequestCode.CLONE_GROUP_OFFSET, {
                    "srcGroup": "Committed", "destGroup": "CopyAll"}))
                assert one.code == every.code == ResponseCode.SUCCESS
            assert broker.group_offsets("CopyOne") == {"Who": {1: 7}}
            assert broker.group_offsets("CopyAll") == {"Who": {1: 7}, "Other": {1: 7}}
        finally:
            await server.stop()
    run_async(main())
