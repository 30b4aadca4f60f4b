"""Record batches stored as one CommitLog entry (Kafka produce) reach remoting consumers as
ordinary MessageExt records: per-record offsets, key -> KEYS, headers -> properties, and
per-record tag filtering."""

from __future__ import annotations

import time

from rocketport.common.batch import build_batch
from rocketport.common.batch.record_batch import Record
from rocketport.common.message import Message
from rocketport.common.tags import tags_code
from rocketport.protocols.remoting.codes import RequestCode, ResponseCode
from rocketport.protocols.remoting.messages import decode_message_ext_records
from rocketport.server import BrokerServer
from tests.support.aio import run as run_async
from tests.support.remoting import remoting_client, request


def pull(offset: int, expression: str = "*") -> object:
    return request(RequestCode.PULL_MESSAGE, {
        "consumerGroup": "kg", "topic": "KafkaMade", "queueId": "0", "queueOffset": str(offset),
        "maxMsgNums": "32", "sysFlag": "4", "commitOffset": "0", "suspendTimeoutMillis": "0",
        "subscription": expression, "subVersion": "0", "expressionType": "TAG"})


def test_inner_batch_records_are_expanded_and_filtered(remoting_config):
    async def main() -> None:
        server = BrokerServer(remoting_config)
        await server.start()
        try:
            broker = server.broker
            broker.create_topic("KafkaMade", read_queue_nums=1, write_queue_nums=1)
            await broker.put_message(Message("KafkaMade", b"plain", {"TAGS": "A"}, queue_id=0))
            tags = ["A", "B", "A", "B"]
            records = [Record(i, i, f"k{i}".encode(), f"v{i}".encode(), [("TAGS", t.encode()), ("h", b"x")])
                       for i, t in enumerate(tags)]
            batch = build_batch(records, base_timestamp=int(time.time() * 1000))
            await broker.put_record_batch("KafkaMade", 0, batch, len(records),
                                          tags_codes=[tags_code(t) for t in tags])
            async with remoting_client(server.front_ends["remoting"].broker_addr()) as client:
                resp = await client.invoke(pull(0))
                assert resp.code == ResponseCode.SUCCESS
                got = decode_message_ext_records(resp.body)
                assert [(m.queue_offset, m.body) for m in got] == [
                    (0, b"plain"), (1, b"v0"), (2, b"v1"), (3, b"v2"), (4, b"v3")]
                assert got[2].keys == ["k1"] and got[2].properties["h"] == "x" and got[2].tags == "B"
                assert resp.ext_fields["nextBeginOffset"] == "5"
                resp = await client.invoke(pull(1, "B"))
                got = decode_message_ext_records(resp.body)
                assert [(m.queue_offset, m.body) for m in got] == [(2, b"v1"), (4, b"v3")]
        finally:
            await server.stop()

    run_async(main())
