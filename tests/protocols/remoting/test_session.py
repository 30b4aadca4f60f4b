"""Sessions over real sockets: concurrency by opaque, oneway, unknown codes, bad frames,
and a hypothesis fuzz that throws random and mutated frames at a live broker."""

from __future__ import annotations

import asyncio
import dataclasses
import socket
import struct
import zlib

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rocketport.common.batch.message_batch import BatchMessage, encode_batch
from rocketport.common.message import decode_properties
from rocketport.common.message_id import decode_offset_msg_id
from rocketport.core.config import BrokerConfig
from rocketport.protocols.remoting import (
    RemotingCommand,
    RemotingConnection,
    SerializeType,
)
from rocketport.protocols.remoting.codes import RequestCode, ResponseCode
from rocketport.protocols.remoting.events import CommandReceived
from rocketport.protocols.remoting.headers import SendMessageRequestHeader, encode_send_message_header_v2
from rocketport.protocols.remoting.messages import decode_message_ext_records
from rocketport.server import BrokerServer
from tests.support.aio import run as run_async
from tests.support.live_broker import start_live_broker
from tests.support.remoting import frame_bytes, remoting_client, request, roundtrip


def send_request(topic: str, body: bytes, queue_id: int = 0) -> RemotingCommand:
    header = SendMessageRequestHeader("pg", topic, "TBW102", 4, queue_id, 0, 0, 0, "TAGS\x01T\x02")
    return request(RequestCode.SEND_MESSAGE_V2, encode_send_message_header_v2(header), body)


def pull_request(topic: str, offset: int, hold_ms: int) -> RemotingCommand:
    return request(RequestCode.PULL_MESSAGE, {
        "consumerGroup": "cg", "topic": topic, "queueId": "0", "queueOffset": str(offset),
        "maxMsgNums": "32", "sysFlag": "2", "commitOffset": "0",
        "suspendTimeoutMillis": str(hold_ms), "subscription": "*", "subVersion": "0"})


def run_with_server(config: BrokerConfig, scenario) -> None:
    async def main() -> None:
        server = BrokerServer(config)
        await server.start()
        try:
            await asyncio.wait_for(scenario(server), 30)
        finally:
            await server.stop()
    run_async(main())


def test_long_poll_is_answered_after_a_later_send_on_the_same_connection(remoting_config):
    async def scenario(server: BrokerServer) -> None:
        server.broker.create_topic("Parked", read_queue_nums=1, write_queue_nums=1)
        async with remoting_client(server.front_ends["remoting"].broker_addr()) as client:
            parked = asyncio.create_task(client.invoke(pull_request("Parked", 0, 10_000)))
            await asyncio.sleep(0.2)
            assert not parked.done()
            sent = await client.invoke(send_request("Parked", b"wake up"))
            assert sent.code == ResponseCode.SUCCESS
            assert not parked.done() or parked.result().code == ResponseCode.SUCCESS
            pulled = await asyncio.wait_for(parked, 5)
            assert pulled.code == ResponseCode.SUCCESS
            assert pulled.ext_fields["nextBeginOffset"] == "1"
            assert b"wake up" in bytes(pulled.body)
    run_with_server(dataclasses.replace(remoting_config, listen_port=0), scenario)


def test_pull_not_found_carries_all_offsets_and_unknown_code_is_not_supported(remoting_config):
    async def scenario(server: BrokerServer) -> None:
        server.broker.create_topic("Empty", read_queue_nums=1, write_queue_nums=1)
        async with remoting_client(server.front_ends["remoting"].broker_addr()) as client:
            resp = await client.invoke(pull_request("Empty", 0, 0))
            assert resp.code == ResponseCode.PULL_NOT_FOUND
            assert {"nextBeginOffset", "minOffset", "maxOffset", "suggestWhichBrokerId"} <= set(resp.ext_fields)
            resp = await client.invoke(request(9999))
            assert resp.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
            resp = await client.invoke(request(RequestCode.PULL_MESSAGE, {"topic": "x"}))
            assert resp.code == ResponseCode.SYSTEM_ERROR  # missing header fields
            resp = await client.invoke(pull_request("NoSuchTopic", 0, 0))
            assert resp.code == ResponseCode.TOPIC_NOT_EXIST
    run_with_server(dataclasses.replace(remoting_config, listen_port=0), scenario)


def test_json_pulls_are_answered_from_their_header_as_commands_would_be(remoting_config):
    """A plain JSON pull is answered from its loaded header; one with numbers where strings
    belong is coerced as any command is, a oneway pull is not answered, and an unknown
    topic is named in the error."""
    import orjson

    def raw(opaque: int, flag: int, **ext: object) -> bytes:
        fields = {"consumerGroup": "cg", "topic": "Raw", "queueId": "0", "queueOffset": "0",
                  "maxMsgNums": "32", "sysFlag": "0", "commitOffset": "0",
                  "suspendTimeoutMillis": "0", "subscription": "*", "subVersion": "0", **ext}
        header = orjson.dumps({"code": RequestCode.PULL_MESSAGE, "language": "JAVA", "version": 0,
                               "opaque": opaque, "flag": flag, "extFields": fields})
        return struct.pack(">ii", 4 + len(header), len(header)) + header

    async def scenario(server: BrokerServer) -> None:
        server.broker.create_topic("Raw", read_queue_nums=1, write_queue_nums=1)
        async with remoting_client(server.front_ends["remoting"].broker_addr()) as client:
            assert (await client.invoke(send_request("Raw", b"m0"))).code == ResponseCode.SUCCESS
        host, port = server.front_ends["remoting"].broker_addr().rsplit(":", 1)
        reader, writer = await asyncio.open_connection(host, int(port))
        writer.write(raw(1, 0) + raw(2, 0, queueOffset=0, maxMsgNums=32) + raw(3, 2)
                     + raw(4, 0, topic="NoSuchTopic") + raw(5, 0))
        conn = RemotingConnection()
        answers: dict[int, RemotingCommand] = {}
        while len(answers) < 4:
            for event in conn.receive_data(await asyncio.wait_for(reader.read(65536), 5)):
                answers[event.command.opaque] = event.command
        writer.close()
        assert sorted(answers) == [1, 2, 4, 5]  # 3 was oneway
        for opaque in (1, 2, 5):
            assert answers[opaque].code == ResponseCode.SUCCESS
            assert answers[opaque].ext_fields["nextBeginOffset"] == "1"
            assert [m.body for m in decode_message_ext_records(answers[opaque].body)] == [b"m0"]
        assert answers[4].code == ResponseCode.TOPIC_NOT_EXIST
    run_with_server(dataclasses.replace(remoting_config, listen_port=0), scenario)


def test_new_group_starts_at_zero_while_the_queue_holds_its_first_message(remoting_config):
    async def scenario(server: BrokerServer) -> None:
        async with remoting_client(server.front_ends["remoting"].broker_addr()) as client:
            assert (await client.invoke(send_request("Fresh", b"x"))).code == ResponseCode.SUCCESS
            q = {"consumerGroup": "newbie", "topic": "Fresh", "queueId": "0"}
            resp = await client.invoke(request(RequestCode.QUERY_CONSUMER_OFFSET, q))
            assert (resp.code, resp.ext_fields["offset"]) == (ResponseCode.SUCCESS, "0")
            await client.invoke(request(RequestCode.UPDATE_CONSUMER_OFFSET, {**q, "commitOffset": "1"}))
            resp = await client.invoke(request(RequestCode.QUERY_CONSUMER_OFFSET, q))
            assert resp.ext_fields["offset"] == "1"
    run_with_server(dataclasses.replace(remoting_config, listen_port=0), scenario)


def _healthy(addr: tuple[str, int]) -> bool:
    probe = request(RequestCode.GET_MAX_OFFSET, {"topic": "Any", "queueId": "0"})
    probe.opaque = 7
    conn = RemotingConnection()
    with socket.create_connection(addr, timeout=5) as sock:
        sock.sendall(frame_bytes(probe))
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                return False
            for event in conn.receive_data(chunk):
                if isinstance(event, CommandReceived) and event.command.opaque == 7:
                    return event.command.code == ResponseCode.SUCCESS


def test_bad_frames_close_only_their_connection(remoting_config):
    live = start_live_broker(remoting_config)
    try:
        host, port = live.addr.split(":")
        addr = (host, int(port))
        # negative length: fatal, the connection is closed without a response
        assert roundtrip(addr, struct.pack(">ii", -5, 0) + b"junk") == []
        # broken JSON with a readable opaque: an error response for that opaque
        broken = b'{"code":34,"opaque":42,"flag":0, oops'
        events = roundtrip(addr, struct.pack(">ii", 4 + len(broken), len(broken)) + broken)
        assert [(e.command.opaque, e.command.code) for e in events] == [(42, ResponseCode.SYSTEM_ERROR)]
        # oversize: fatal, before any of the announced bytes is buffered
        assert roundtrip(addr, struct.pack(">ii", 0x7FFFFFFF, 2) + b"{}") == []
        # unknown serialize type: fatal
        assert roundtrip(addr, struct.pack(">iI", 6, (7 << 24) | 2) + b"{}") == []
        assert _healthy(addr)
    finally:
        live.stop()


_VALID = [
    frame_bytes(send_request("FuzzTopic", b"payload")),
    frame_bytes(pull_request("FuzzTopic", 0, 0)),
    frame_bytes(request(RequestCode.HEART_BEAT, body=b'{"clientID":"c","consumerDataSet":[{"groupName":"g",'
                   b'"consumeType":1,"messageModel":1,"consumeFromWhere":0,'
                   b'"subscriptionDataSet":[{"topic":"FuzzTopic","subString":"*"}]}]}')),
    frame_bytes(request(RequestCode.LOCK_BATCH_MQ, body=b'{"consumerGroup":"g","clientId":"c","mqSet":[]}')),
    frame_bytes(request(RequestCode.SEND_BATCH_MESSAGE, {"a": "p", "b": "FuzzTopic", "c": "TBW102", "d": "4",
                                                    "e": "0", "f": "0", "g": "0", "h": "0"}, b"\x00" * 30)),
]


@st.composite
def mutated_frames(draw) -> bytes:
    data = bytearray(draw(st.sampled_from(_VALID)))
    for _ in range(draw(st.integers(1, 6))):
        op = draw(st.sampled_from(["flip", "cut", "insert"]))
        if op == "flip" and data:
            i = draw(st.integers(0, len(data) - 1))
            data[i] = draw(st.integers(0, 255))
        elif op == "cut" and data:
            i = draw(st.integers(0, len(data) - 1))
            del data[i:i + draw(st.integers(1, 16))]
        else:
            i = draw(st.integers(0, len(data)))
            data[i:i] = draw(st.binary(min_size=1, max_size=8))
    return bytes(data)


def test_fuzzed_frames_never_take_the_broker_down(remoting_config):
    live = start_live_broker(remoting_config)
    try:
        host, port = live.addr.split(":")
        addr = (host, int(port))

        @settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
        @given(st.lists(st.one_of(st.binary(max_size=64), mutated_frames(), st.sampled_from(_VALID)),
                        min_size=1, max_size=4))
        def fuzz(chunks: list[bytes]) -> None:
            roundtrip(addr, b"".join(chunks))

        fuzz()
        assert _healthy(addr)
        assert live.call(lambda: live.server.broker.running)
    finally:
        live.stop()


def test_binary_serialized_request_is_answered_in_kind(remoting_config):
    live = start_live_broker(remoting_config)
    try:
        host, port = live.addr.split(":")
        probe = request(RequestCode.GET_MIN_OFFSET, {"topic": "Any", "queueId": "0"})
        probe.serialize_type = SerializeType.ROCKETMQ
        probe.opaque = 99
        with socket.create_connection((host, int(port)), timeout=5) as sock:
            sock.sendall(frame_bytes(probe))
            data = b""
            while len(data) < 8 or len(data) < 4 + struct.unpack(">i", data[:4])[0]:
                data += sock.recv(65536)
        assert data[4] == SerializeType.ROCKETMQ  # the type byte of the reply
        [event] = RemotingConnection().receive_data(data)
        assert (event.command.opaque, event.command.code) == (99, ResponseCode.SUCCESS)
        assert event.command.ext_fields["offset"] == "0"
    finally:
        live.stop()


def test_single_sends_in_both_serialize_types_store_properties_as_sent(remoting_config):
    """JSON sends take the synchronous path, binary ones the general path: same answers,
    and the record keeps the properties as sent, tags code included."""
    props = 'TAGS\x01T\x02UNIQ_KEY\x01id "quoted" \\ 100%\x02KEYS\x01k1 k2\x02'

    async def scenario(server: BrokerServer) -> None:
        server.broker.create_topic("AsSent", read_queue_nums=1, write_queue_nums=1)
        header = SendMessageRequestHeader("pg", "AsSent", "TBW102", 4, 0, 0, 0, 0, props)
        msg_ids = []
        async with remoting_client(server.front_ends["remoting"].broker_addr()) as client:
            for offset, serialize_type in enumerate((SerializeType.JSON, SerializeType.ROCKETMQ)):
                send = request(RequestCode.SEND_MESSAGE_V2, encode_send_message_header_v2(header), b"x")
                send.serialize_type = serialize_type
                sent = await client.invoke(send)
                assert (sent.code, sent.serialize_type) == (ResponseCode.SUCCESS, serialize_type)
                assert sent.ext_fields["transactionId"] == 'id "quoted" \\ 100%'
                assert (sent.ext_fields["queueId"], sent.ext_fields["queueOffset"]) == ("0", str(offset))
                msg_ids.append(sent.ext_fields["msgId"])
            for expression, count in (("T", 2), ("other", 0)):
                pull = pull_request("AsSent", 0, 0)
                pull.ext_fields.update(sysFlag="4", subscription=expression, expressionType="TAG")
                pulled = await client.invoke(pull)
                found = decode_message_ext_records(pulled.body) if pulled.code == ResponseCode.SUCCESS else []
                assert len(found) == count
                assert all(m.properties == decode_properties(props) for m in found)
                assert [decode_offset_msg_id(i).commit_log_offset for i in msg_ids[:count]] == [
                    m.commit_log_offset for m in found]
    run_with_server(dataclasses.replace(remoting_config, listen_port=0), scenario)


def test_batch_send_stores_each_message_with_its_properties_as_sent(remoting_config):
    """A batch's properties go to the records undecoded: tags codes, unique keys and the
    refusal of delayed messages must still be what decoding them would give."""
    batch = [BatchMessage(b"a", {"TAGS": "A", "UNIQ_KEY": "U1", "KEYS": "k"}, flag=3),
             BatchMessage(b"b", {"UNIQ_KEY": "U2"}),
             BatchMessage(b"c", {"KEYS": "x", "TAGS": "B", "UNIQ_KEY": "U3"})]

    def send(messages: list[BatchMessage], properties: str | None = None) -> RemotingCommand:
        header = SendMessageRequestHeader("pg", "Batched", "TBW102", 4, 0, 0, 0, 0, properties,
                                          batch=True)
        return request(RequestCode.SEND_BATCH_MESSAGE, encode_send_message_header_v2(header),
                       encode_batch(messages))

    async def scenario(server: BrokerServer) -> None:
        server.broker.create_topic("Batched", read_queue_nums=1, write_queue_nums=1)
        async with remoting_client(server.front_ends["remoting"].broker_addr()) as client:
            sent = await client.invoke(send(batch))
            assert sent.code == ResponseCode.SUCCESS
            assert sent.ext_fields["transactionId"] == ""  # as RocketMQ: the batch has no key of its own
            assert sent.ext_fields["queueOffset"] == "0"
            delayed = await client.invoke(send([BatchMessage(b"d", {"DELAY": "2"})]))
            assert delayed.code != ResponseCode.SUCCESS
            for expression, bodies in (("*", [b"a", b"b", b"c"]), ("A || B", [b"a", b"c"]), ("B", [b"c"])):
                pull = pull_request("Batched", 0, 0)
                pull.ext_fields.update(sysFlag="4", subscription=expression, expressionType="TAG")
                found = decode_message_ext_records((await client.invoke(pull)).body)
                assert [m.body for m in found] == bodies
                wanted = [m for m in batch if m.body in bodies]
                assert [(m.properties, m.flag) for m in found] == [(m.properties, m.flag) for m in wanted]
            answers = []  # JSON pulls are answered synchronously, binary ones by the general path
            for serialize_type in (SerializeType.JSON, SerializeType.ROCKETMQ):
                pull = pull_request("Batched", 1, 0)
                pull.serialize_type = serialize_type
                answer = await client.invoke(pull)
                answers.append((answer.code, answer.ext_fields, bytes(answer.body)))
            assert answers[0] == answers[1]
            assert answers[0][1]["nextBeginOffset"] == "3"
            everything = decode_message_ext_records((await client.invoke(pull_request("Batched", 0, 0))).body)
            assert [decode_offset_msg_id(i).commit_log_offset for i in sent.ext_fields["msgId"].split(",")] == [
                m.commit_log_offset for m in everything]
            keyed = await client.invoke(send(batch[:1], "UNIQ_KEY\x01B1\x02"))
            assert keyed.ext_fields["transactionId"] == "B1"
            assert keyed.ext_fields["queueOffset"] == "3"
    run_with_server(dataclasses.replace(remoting_config, listen_port=0), scenario)


def test_compressed_batch_body_is_inflated_and_a_corrupt_or_oversize_one_refused(remoting_config):
    """A batch body zlib-compressed whole (sysFlag 1, as the C++ client sends one over
    4 KiB) is stored as its messages, plain; a body that does not inflate, or inflates past
    maxMessageSize, is MESSAGE_ILLEGAL and stores nothing."""
    batch = [BatchMessage(b"m%d" % i * 50, {"UNIQ_KEY": f"U{i}"}) for i in range(40)]

    def send(body: bytes) -> RemotingCommand:
        header = SendMessageRequestHeader("pg", "Zipped", "TBW102", 4, 0, 1, 0, 0, None, batch=True)
        return request(RequestCode.SEND_BATCH_MESSAGE, encode_send_message_header_v2(header), body)

    async def scenario(server: BrokerServer) -> None:
        server.broker.create_topic("Zipped", read_queue_nums=1, write_queue_nums=1)
        async with remoting_client(server.front_ends["remoting"].broker_addr()) as client:
            sent = await client.invoke(send(zlib.compress(encode_batch(batch))))
            assert sent.code == ResponseCode.SUCCESS
            found = decode_message_ext_records((await client.invoke(pull_request("Zipped", 0, 0))).body)
            assert [(m.body, m.sys_flag & 1) for m in found] == [(m.body, 0) for m in batch[:len(found)]]
            assert len(found) == 32  # a pull's most
            for bad in (b"\x78\x9c not zlib", zlib.compress(b"\0" * (remoting_config.max_message_size + 1))):
                refused = await client.invoke(send(bad))
                assert refused.code == ResponseCode.MESSAGE_ILLEGAL
                assert "compressed batch body" in refused.remark
            assert server.broker.max_offset("Zipped", 0) == len(batch)
    run_with_server(dataclasses.replace(remoting_config, listen_port=0), scenario)


def test_sends_under_sync_flush_are_answered_once_flushed(remoting_config):
    """SYNC_FLUSH sends cannot be answered synchronously: the send lane answers them once
    the fsync covering them is done; pipelined, they all succeed with consecutive offsets."""
    config = dataclasses.replace(remoting_config, flush_disk_type="SYNC_FLUSH")

    async def scenario(server: BrokerServer) -> None:
        server.broker.create_topic("Synced", read_queue_nums=1, write_queue_nums=1)
        async with remoting_client(server.front_ends["remoting"].broker_addr()) as client:
            sent = await asyncio.gather(*(client.invoke(send_request("Synced", b"m%d" % i))
                                          for i in range(20)))
            assert all(s.code == ResponseCode.SUCCESS for s in sent)
            assert sorted(int(s.ext_fields["queueOffset"]) for s in sent) == list(range(20))
            pulled = await client.invoke(pull_request("Synced", 0, 0))
            assert len(decode_message_ext_records(pulled.body)) == 20
    run_with_server(config, scenario)


def test_a_broker_on_listen_port_0_records_its_bound_port_as_the_store_host(remoting_config):
    """RocketMQ clients send a refused message back to its store host: with listenPort 0
    that must be the port bound, not 0 (a C++ client's send-back was lost that way)."""
    async def scenario(server: BrokerServer) -> None:
        addr = server.front_ends["remoting"].broker_addr()
        port = int(addr.rpartition(":")[2])
        assert port != 0
        async with remoting_client(addr) as client:
            sent = await client.invoke(send_request("HostTopic", b"x"))
            assert sent.code == ResponseCode.SUCCESS
            msg_id = decode_offset_msg_id(sent.ext_fields["msgId"])
            assert msg_id.port == port
            [stored] = decode_message_ext_records((await client.invoke(pull_request("HostTopic", 0, 0))).body)
            assert stored.store_host[1] == port
    run_with_server(dataclasses.replace(remoting_config, listen_port=0), scenario)
