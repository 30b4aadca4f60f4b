"""The read rules hold in the core, so every front-end applies the same ones: a topic whose
perm lacks PERM_READ is not served to anyone, and a queue outside the topic's read queues
is refused. Written against the Kafka port (which once checked only the range) and the
remoting port, through real requests on a live broker."""

from __future__ import annotations

import dataclasses

import pytest

from rocketport.common.message import Message
from rocketport.core.config import ProtocolConfig
from rocketport.core.metadata.topics import PERM_RW, PERM_WRITE
from rocketport.protocols.kafka.errors import ErrorCode
from rocketport.protocols.remoting import RemotingCommand
from rocketport.protocols.remoting.codes import RequestCode, ResponseCode
from tests.protocols.kafka.kafka_raw import RawClient
from tests.support.live_broker import LiveBroker, start_live_broker
from tests.support.remoting import remoting_client


@pytest.fixture
def broker(small_config) -> LiveBroker:
    config = dataclasses.replace(small_config, listen_port=0, namesrv=ProtocolConfig(True, 0),
                                 kafka=ProtocolConfig(True, 0))
    live = start_live_broker(config)
    try:
        live.call(lambda: live.server.broker.create_topic("Sealed", read_queue_nums=2,
                                                          write_queue_nums=2))
        live.call(live.server.broker.put_message(Message("Sealed", b"secret", queue_id=0)))
        live.call(lambda: live.server.broker.create_topic("Sealed", read_queue_nums=2,
                                                          write_queue_nums=2, perm=PERM_WRITE))
        yield live
    finally:
        live.stop()


def test_kafka_fetch_of_an_unreadable_topic_is_refused(broker):
    with RawClient(broker.port) as client:
        partition = client.fetch("Sealed", 0, 0)
        assert partition["error_code"] == ErrorCode.TOPIC_AUTHORIZATION_FAILED
        assert not partition["records"]
        # readable again: served
        broker.call(lambda: broker.server.broker.create_topic("Sealed", read_queue_nums=2,
                                                              write_queue_nums=2, perm=PERM_RW))
        partition = client.fetch("Sealed", 0, 0)
        assert partition["error_code"] == ErrorCode.NONE and partition["records"]


def test_kafka_fetch_outside_the_read_queues_is_unknown_partition(broker):
    broker.call(lambda: broker.server.broker.create_topic("Sealed", read_queue_nums=2,
                                                          write_queue_nums=2, perm=PERM_RW))
    with RawClient(broker.port) as client:
        assert client.fetch("Sealed", 2, 0)["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert client.fetch("Nowhere", 0, 0)["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


async def _pull(addr: str, topic: str, queue_id: int) -> RemotingCommand:
    async with remoting_client(addr) as client:
        return await client.invoke(RemotingCommand(code=RequestCode.PULL_MESSAGE, ext_fields={
            "consumerGroup": "G", "topic": topic, "queueId": str(queue_id), "queueOffset": "0",
            "maxMsgNums": "32", "sysFlag": "0", "commitOffset": "0", "suspendTimeoutMillis": "0",
            "subscription": "*", "subVersion": "0"}))


def test_remoting_pull_of_an_unreadable_topic_is_refused(broker):
    response = broker.call(_pull(broker.addr, "Sealed", 0))
    assert response.code == ResponseCode.NO_PERMISSION and "not readable" in response.remark


def test_the_facade_refuses_reads_of_an_unreadable_topic(broker):
    from rocketport.core.errors import TopicNotReadable
    with pytest.raises(TopicNotReadable):
        broker.call(lambda: broker.server.broker.get_messages("Sealed", 0, 0, 32))


def test_a_property_name_that_is_not_utf8_does_not_make_a_topic_unfetchable(broker):
    """Property names from remoting are bytes, read with surrogateescape; a Kafka fetch
    gives them as valid UTF-8 (U+FFFD for the bad bytes) instead of failing (which closed every consumer's
    connection on that partition)."""
    from rocketport.common.message import decode_properties, encode_properties
    raw = b"bad\xffname\x01v\x02"
    props = decode_properties(raw)
    assert encode_properties(props) == raw
    broker.call(lambda: broker.server.broker.create_topic("Odd", read_queue_nums=1,
                                                          write_queue_nums=1))
    broker.call(broker.server.broker.put_message(Message("Odd", b"body", props, queue_id=0)))
    with RawClient(broker.port) as client:
        partition = client.fetch("Odd", 0, 0)
    assert partition["error_code"] == ErrorCode.NONE
    from rocketport.common.batch import iter_records
    parts = partition["records"] if isinstance(partition["records"], list) else [partition["records"]]
    records = [r for part in parts for r in iter_records(part)]
    assert records[0].value == b"body"
    assert ("bad\ufffdname", b"v") in records[0].headers  # a valid UTF-8 key, the value intact
