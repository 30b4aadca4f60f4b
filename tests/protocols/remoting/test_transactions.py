"""Transactional sends over remoting: half messages stay hidden until END_TRANSACTION
commits them, and the broker asks the producer (CHECK_TRANSACTION_STATE push) about
halves left open. Driven with Rocketport's own codec client: neither installable client
has a transaction API (remoting.md)."""

from __future__ import annotations

import asyncio
import dataclasses

from rocketport.common.message import encode_properties
from rocketport.protocols.remoting import RemotingCommand
from rocketport.protocols.remoting.client import RemotingClient, request
from rocketport.protocols.remoting.codes import RequestCode, ResponseCode
from rocketport.protocols.remoting.headers import SendMessageRequestHeader, encode_send_message_header_v2
from rocketport.protocols.remoting.messages import decode_message_ext_records, decode_offset_msg_id
from rocketport.server import BrokerServer
from tests.support.aio import run as run_async


def prepared(topic: str, body: bytes, uniq: str) -> RemotingCommand:
    props = encode_properties({"TRAN_MSG": "true", "PGROUP": "TxPG", "UNIQ_KEY": uniq}).decode()
    header = SendMessageRequestHeader("TxPG", topic, "TBW102", 4, 0, 4, 0, 0, props)
    return request(RequestCode.SEND_MESSAGE_V2, encode_send_message_header_v2(header), body)


def end(resp: RemotingCommand, state: int, from_check: bool = False, offset: str | None = None) -> RemotingCommand:
    commit_log_offset = offset or str(decode_offset_msg_id(resp.ext_fields["msgId"])[2])
    return request(RequestCode.END_TRANSACTION, {
        "producerGroup": "TxPG", "tranStateTableOffset": resp.ext_fields.get("queueOffset", "0"),
        "commitLogOffset": commit_log_offset, "commitOrRollback": str(state),
        "msgId": "x", "fromTransactionCheck": str(from_check).lower()})


def pull(topic: str) -> RemotingCommand:
    return request(RequestCode.PULL_MESSAGE, {
        "consumerGroup": "TxCG", "topic": topic, "queueId": "0", "queueOffset": "0",
        "maxMsgNums": "32", "sysFlag": "0", "commitOffset": "0", "suspendTimeoutMillis": "0",
        "subscription": "*", "subVersion": "0"})


def test_commit_rollback_and_check_back(remoting_config):
    config = dataclasses.replace(remoting_config, transaction_time_out=200,
                                 transaction_check_interval=100)

    async def main() -> None:
        server = BrokerServer(config)
        await server.start()
        checks: asyncio.Queue[RemotingCommand] = asyncio.Queue()
        try:
            server.broker.create_topic("TxTopic", read_queue_nums=1, write_queue_nums=1)
            async with await RemotingClient.connect(server.front_ends["remoting"].broker_addr(),
                                                    on_request=checks.put_nowait) as client:
                hb = b'{"clientID":"tx-client","producerDataSet":[{"groupName":"TxPG"}]}'
                assert (await client.invoke(request(RequestCode.HEART_BEAT, body=hb))).code == 0

                first = await client.invoke(prepared("TxTopic", b"committed", "U1"))
                assert first.code == ResponseCode.SUCCESS
                assert (await client.invoke(pull("TxTopic"))).code == ResponseCode.PULL_NOT_FOUND
                assert (await client.invoke(end(first, 8))).code == ResponseCode.SUCCESS
                got = await client.invoke(pull("TxTopic"))
                assert [m.body for m in decode_message_ext_records(got.body)] == [b"committed"]

                second = await client.invoke(prepared("TxTopic", b"left open", "U2"))
                assert second.code == ResponseCode.SUCCESS
                check = await asyncio.wait_for(checks.get(), 15)
                assert check.code == RequestCode.CHECK_TRANSACTION_STATE
                [half] = decode_message_ext_records(check.body)
                assert (half.topic, half.body, half.uniq_key) == ("TxTopic", b"left open", "U2")
                resp = await client.invoke(end(second, 12, True, check.ext_fields["commitLogOffset"]))
                assert resp.code == ResponseCode.SUCCESS
                await asyncio.sleep(0.5)
                got = await client.invoke(pull("TxTopic"))
                assert [m.body for m in decode_message_ext_records(got.body)] == [b"committed"]
        finally:
            await server.stop()

    run_async(asyncio.wait_for(main(), 60))
