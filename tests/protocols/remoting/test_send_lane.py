"""The send lane: single sends pipelined in one write are stored together, in order,
each answered on its own; whatever the lane declines is served by the handlers in its
place in the stream."""

from __future__ import annotations

import dataclasses

from rocketport.common.message_id import decode_offset_msg_id
from rocketport.core.config import ProtocolConfig
from rocketport.protocols.remoting import RemotingCommand
from rocketport.protocols.remoting.client import request
from rocketport.protocols.remoting.codes import RequestCode, ResponseCode
from rocketport.protocols.remoting.command import FLAG_ONEWAY
from rocketport.protocols.remoting.events import CommandReceived
from rocketport.protocols.remoting.headers import SendMessageRequestHeader, encode_send_message_header_v2
from rocketport.protocols.remoting.messages import decode_message_ext_records
from tests.support.live_broker import start_live_broker
from tests.support.remoting import frame_bytes, roundtrip


def send(opaque: int, topic: str, body: bytes, queue_id: int = 0, properties: str | None = None,
         **ext: object) -> RemotingCommand:
    props = properties if properties is not None else f"TAGS\x01T\x02UNIQ_KEY\x01U{opaque:08d}\x02"
    header = SendMessageRequestHeader("pg", topic, "TBW102", 4, queue_id, 0, 0, 0, props)
    command = request(RequestCode.SEND_MESSAGE_V2, {**encode_send_message_header_v2(header), **ext}, body)
    command.opaque = opaque
    return command


def pull(opaque: int, topic: str, queue_id: int, offset: int = 0) -> RemotingCommand:
    command = request(RequestCode.PULL_MESSAGE, {
        "consumerGroup": "cg", "topic": topic, "queueId": str(queue_id), "queueOffset": str(offset),
        "maxMsgNums": "64", "sysFlag": "0", "commitOffset": "0", "suspendTimeoutMillis": "0",
        "subscription": "*", "subVersion": "0"})
    command.opaque = opaque
    return command


def answers(addr: str, commands: list[RemotingCommand]) -> dict[int, RemotingCommand]:
    """Write all the commands at once (one read for the broker) and collect the answers."""
    host, port = addr.rsplit(":", 1)
    events = roundtrip((host, int(port)), b"".join(frame_bytes(c) for c in commands))
    assert all(isinstance(e, CommandReceived) for e in events)
    return {e.command.opaque: e.command for e in events}


def stored(live, topic: str, queue_id: int) -> list:
    got = answers(live.addr, [pull(1, topic, queue_id)])[1]
    assert got.code == ResponseCode.SUCCESS
    return decode_message_ext_records(got.body)


def test_pipelined_sends_are_stored_in_order_and_each_answered(remoting_config):
    live = start_live_broker(remoting_config)
    try:
        live.call(lambda: live.server.broker.create_topic("Lane", read_queue_nums=4, write_queue_nums=4))
        sends = [send(i, "Lane", b"body-%d" % i, queue_id=i % 4) for i in range(1, 81)]
        got = answers(live.addr, sends)
        assert sorted(got) == list(range(1, 81))
        for i, response in got.items():
            assert response.code == ResponseCode.SUCCESS, response.remark
            assert response.ext_fields["queueId"] == str(i % 4)
            assert response.ext_fields["queueOffset"] == str((i - 1) // 4)
            assert response.ext_fields["transactionId"] == f"U{i:08d}"
        for queue_id in range(4):
            records = stored(live, "Lane", queue_id)
            numbers = [i for i in range(1, 81) if i % 4 == queue_id]
            assert [bytes(r.body) for r in records] == [b"body-%d" % i for i in numbers]
            for record, i in zip(records, numbers):
                assert record.properties["UNIQ_KEY"] == f"U{i:08d}"
                msg_id = got[i].ext_fields["msgId"]
                assert decode_offset_msg_id(msg_id).commit_log_offset == record.commit_log_offset
    finally:
        live.stop()


def test_declined_requests_keep_their_place_and_errors_stay_with_their_request(remoting_config):
    config = dataclasses.replace(remoting_config, max_message_size=4096)
    live = start_live_broker(config)
    try:
        live.call(lambda: live.server.broker.create_topic("Mixed", read_queue_nums=2, write_queue_nums=2))
        oneway = send(4, "Mixed", b"oneway")
        oneway.flag |= FLAG_ONEWAY
        numeric = send(8, "Mixed", b"numeric")
        numeric.ext_fields["e"] = 0  # a JSON number: the handlers coerce it
        got = answers(live.addr, [
            send(1, "Mixed", b"first"),
            send(2, "Mixed", b"too large" * 1000),  # over maxMessageSize: refused alone
            send(3, "Mixed", b"delayed", properties="DELAY\x011\x02"),  # scheduled, not in queue 0
            oneway,  # stored, never answered
            send(5, "Mixed", b"bad queue", queue_id=7),  # the topic has 2 queues
            send(6, "AutoCreated", b"new topic"),  # auto-created by the handlers
            send(7, "Mixed", b"after"),
            numeric,
        ])
        assert sorted(got) == [1, 2, 3, 5, 6, 7, 8]
        assert got[2].code == ResponseCode.MESSAGE_ILLEGAL
        assert got[5].code == ResponseCode.SYSTEM_ERROR and "7" in got[5].remark
        for ok in (1, 3, 6, 7, 8):
            assert got[ok].code == ResponseCode.SUCCESS, got[ok].remark
        assert [bytes(r.body) for r in stored(live, "Mixed", 0)] == [b"first", b"oneway", b"after", b"numeric"]
        assert [got[i].ext_fields["queueOffset"] for i in (1, 7, 8)] == ["0", "2", "3"]
        assert [bytes(r.body) for r in stored(live, "AutoCreated", 0)] == [b"new topic"]
    finally:
        live.stop()


def test_a_read_larger_than_a_commitlog_segment_is_stored_message_by_message(remoting_config):
    config = dataclasses.replace(remoting_config, mapped_file_size_commit_log=64 * 1024)
    live = start_live_broker(config)
    try:
        live.call(lambda: live.server.broker.create_topic("Big", read_queue_nums=1, write_queue_nums=1))
        sends = [send(i, "Big", bytes([i]) * 2048) for i in range(1, 61)]  # ~130 KiB in one write
        got = answers(live.addr, sends)
        assert all(got[i].code == ResponseCode.SUCCESS for i in range(1, 61))
        records = []
        while len(records) < 60:  # a pull reads within one segment
            part = answers(live.addr, [pull(1, "Big", 0, len(records))])[1]
            assert part.code == ResponseCode.SUCCESS
            records += decode_message_ext_records(part.body)
        assert [bytes(r.body) for r in records] == [bytes([i]) * 2048 for i in range(1, 61)]
        assert len({decode_offset_msg_id(got[i].ext_fields["msgId"]).commit_log_offset >> 16
                    for i in range(1, 61)}) > 1  # the messages span segments
    finally:
        live.stop()


def test_max_message_size_holds_for_remoting_when_stomp_takes_more(remoting_config):
    """The store takes the largest front-end limit (STOMP's 1 MiB here); a RocketMQ send
    over maxMessageSize is still MESSAGE_ILLEGAL, through the lane or the handlers."""
    config = dataclasses.replace(remoting_config, max_message_size=4096,
                                 stomp=ProtocolConfig(True, 0, max_message_size=1 << 20))
    live = start_live_broker(config)
    try:
        live.call(lambda: live.server.broker.create_topic("Big", read_queue_nums=1, write_queue_nums=1))
        got = answers(live.addr, [
            send(1, "Big", b"x" * 5000),
            send(2, "Big", b"y" * 5000, properties="DELAY\x011\x02"),  # the handlers' put
            send(3, "Big", b"fits"),
        ])
        assert [got[i].code for i in (1, 2, 3)] == [ResponseCode.MESSAGE_ILLEGAL] * 2 + [ResponseCode.SUCCESS]
        assert [bytes(r.body) for r in stored(live, "Big", 0)] == [b"fits"]
    finally:
        live.stop()
