"""Hostile input against a live broker: every front-end's decoder, fuzzed over TCP.

Run: python bench/fuzz.py [--inputs N] [--seed S] [--front-ends remoting,namesrv,kafka,stomp,ws,amqp,http,tls]

Starts `python -m rocketport broker` on a temporary store with free ports, then, one
front-end at a time, sends N inputs (default 1,000,000 each) drawn from:
  (a) a mutation fuzzer over a corpus of valid requests built with the project's own
      codecs: bit flips, interesting bytes and integers, byte insert/delete, repeated
      chunks, truncation, splicing, length fields tampered with or made huge, JSON tokens
      replaced, varint bombs; half of the mutations change one part of a request (a
      remoting header or body, a Kafka request or the inside of its record batch) and
      rebuild the lengths and checksums around it, so they reach past the framing;
  (b) random frames (random content in a valid frame) and random bytes.
Inputs share a connection while the protocol keeps it open: a local copy of the
front-end's own sans-IO decoder (`stream`) says where the broker's connection stops (a
fatal framing error, a frame left incomplete), so every input sent is read from a frame
boundary by the broker and none is wasted behind a dead one. Each connection is written
in one go, half-closed, and read until the broker closes it; several run at once.

After every batch of inputs (--batch, 1,000) a fresh connection sends a well-formed
request (the front-end's `probe`) that must be answered within --probe-timeout (1 s),
else a hang is counted; a broker process that has exited is a crash (it is restarted
and the run goes on). The inputs of the connections before a crash or hang are saved
under --save for replay. RSS is the broker's anonymous resident memory (RssAnon in
/proc/PID/status: heap, not the store's mapped files) before and after each front-end.

Prints one JSON line per case per front-end: inputs_<fe>, crashes_<fe>, hangs_<fe>
(counts), rss_growth_<fe> (MiB); and seconds_<fe>, probe_max_<fe> (ms), tracebacks_<fe>
(Python tracebacks in the broker's log during the phase: exceptions that client input
should not cause). Exit status 1 when anything crashed or hung.

STOMP, Web-STOMP (ws), AMQP, HTTP and TLS (ClientHellos to stomp.tlsPort, its probe a
handshake and a CONNECT) mutate the well-formed openings of tests/support/hostile_inputs.py,
one connection per input. To add a front-end: one corpus function and one probe function,
and a row in FRONT_ENDS (a `stream` model is optional: without one, each input gets its own
connection).

The fuzz broker runs with autoCreateTopicEnable=false and small consume-queue files, so
that well-formed requests naming new topics (which a mutation makes at every byte of a
topic name) cannot fill the disk by design; the corpus leaves out topic and group
creation for the same reason.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import os
import random
import re
import shutil
import socket
import ssl
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from crc32c import crc32c

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests.support, tests.tls

from rocketport.common.batch import Record, build_batch
from rocketport.common.batch.message_batch import BatchMessage, encode_batch
from rocketport.protocols.kafka import codec
from rocketport.protocols.kafka.connection import KafkaServerConnection
from rocketport.protocols.kafka.events import BadRequest, UnsupportedVersion
from rocketport.protocols.kafka.schema import APIS, ApiKey
from rocketport.protocols.kafka.schema._dsl import Field
from rocketport.protocols.remoting import (
    FLAG_ONEWAY,
    FLAG_RESPONSE,
    CommandReceived,
    LanguageCode,
    RemotingCommand,
    RemotingConnection,
    RequestCode,
    SerializeType,
    encode_command,
)
from rocketport.protocols.remoting.frame import encode_json_header, encode_rocketmq_header
from rocketport.protocols.remoting.headers import SendMessageRequestHeader, encode_send_message_header_v2
from tests.support.hostile_inputs import seeds as opening_seeds  # noqa: E402
from tests.support.remoting import free_port  # noqa: E402
from tests.tls.certs import make_pki  # noqa: E402

TOPIC = "FuzzTopic"
GROUP = "fuzz-group"
PARTITIONS = 4
_SIZE = struct.Struct(">i")
_PREFIX = struct.Struct(">iI")

Wrap = Callable[[Sequence[bytes]], bytes]


# ------------------------------------------------------------------ corpus samples
@dataclass(slots=True)
class Sample:
    """A valid request: its parts, and how to frame parts into the bytes on the wire.

    Structure-aware mutations change one part and wrap again, so lengths and checksums
    around the part stay right; raw mutations change `frame` itself. A sample may also
    carry its decoded `value` (a dict of fields) and `encode`, the whole way back to the
    frame: value mutations change one field to an edge value of its kind and encode the
    request again, well-formed, so they reach the handlers rather than the decoder.
    """

    parts: tuple[bytes, ...]
    wrap: Wrap
    value: dict[str, Any] | None = None
    encode: Callable[[dict[str, Any]], bytes] | None = None
    frame: bytes = b""

    def __post_init__(self) -> None:
        self.frame = self.wrap(self.parts)


def whole(frame: bytes) -> Sample:
    """A sample with no structure the mutator knows of (one part, framed as is)."""
    return Sample((frame,), lambda parts: parts[0])


# ------------------------------------------------------------------ remoting
def _remoting_wrap(serialize_type: int) -> Wrap:
    def wrap(parts: Sequence[bytes]) -> bytes:
        header, body = parts
        return _PREFIX.pack(4 + len(header) + len(body), (serialize_type << 24) | (len(header) & 0xFFFFFF)) \
            + header + body
    return wrap


def remoting_sample(command: RemotingCommand) -> Sample:
    if command.serialize_type == SerializeType.ROCKETMQ:
        header = encode_rocketmq_header(command)
    else:
        header = encode_json_header(command)
    body: Any = bytes(command.body)
    if body[:1] == b"{":
        body = json.loads(body)  # a JSON body's fields are mutated like the header's
    value = {"code": command.code, "language": int(command.language), "version": command.version,
             "opaque": command.opaque, "flag": command.flag, "remark": command.remark,
             "ext": dict(command.ext_fields), "body": body}
    return Sample((header, bytes(command.body)), _remoting_wrap(int(command.serialize_type)), value,
                  _remoting_encoder(command.serialize_type))


def _remoting_encoder(serialize_type: SerializeType) -> Callable[[dict[str, Any]], bytes]:
    def encode(value: dict[str, Any]) -> bytes:
        body = value["body"]
        if not isinstance(body, (bytes, bytearray)):
            body = json.dumps(body).encode()
        command = RemotingCommand(value["code"], value["language"], value["version"], value["opaque"],
                                  value["flag"], value["remark"], value["ext"], body, serialize_type)
        return b"".join(bytes(part) for part in encode_command(command))
    return encode


def _req(code: int, ext: dict[str, str] | None = None, body: bytes = b"", opaque: int = 1,
         flag: int = 0) -> RemotingCommand:
    return RemotingCommand(code=int(code), opaque=opaque, flag=flag, ext_fields=ext or {}, body=body)


def _both_serializations(commands: list[RemotingCommand]) -> list[Sample]:
    samples = []
    for command in commands:
        samples.append(remoting_sample(command))
        binary = RemotingCommand(command.code, command.language, command.version, command.opaque, command.flag,
                                 command.remark, dict(command.ext_fields), command.body, SerializeType.ROCKETMQ)
        samples.append(remoting_sample(binary))
    return samples


def remoting_corpus() -> list[Sample]:
    """Requests a RocketMQ client and admin tool send to a broker (topic and group creation
    and topic deletion left out: see the module docstring)."""
    now = str(int(time.time() * 1000))
    props = "TAGS\x01TagA\x02KEYS\x01k1 k2\x02UNIQ_KEY\x01C0A80001000018B4AAC2\x02WAIT\x01true\x02"
    send = SendMessageRequestHeader("fuzz-producer", TOPIC, "TBW102", 4, 0, 0, int(now), 0, props)
    v2 = encode_send_message_header_v2(send)
    v1 = {"producerGroup": "fuzz-producer", "topic": TOPIC, "defaultTopic": "TBW102", "defaultTopicQueueNums": "4",
          "queueId": "1", "sysFlag": "0", "bornTimestamp": now, "flag": "0", "properties": props,
          "reconsumeTimes": "0", "unitMode": "false", "batch": "false"}
    batch_body = encode_batch([BatchMessage(b"batch-one", {"TAGS": "TagA", "KEYS": "b1"}),
                               BatchMessage(b"batch-two" * 20, {"UNIQ_KEY": "ABC"}, flag=3)])
    batch_ext = dict(v2, m="true", i="")
    pull = {"consumerGroup": GROUP, "topic": TOPIC, "queueId": "0", "queueOffset": "0", "maxMsgNums": "32",
            "sysFlag": "0", "commitOffset": "0", "suspendTimeoutMillis": "0", "subscription": "*",
            "subVersion": "0", "expressionType": "TAG"}
    heartbeat = (b'{"clientID":"127.0.0.1@fuzz","producerDataSet":[{"groupName":"fuzz-producer"}],'
                 b'"consumerDataSet":[{"groupName":"' + GROUP.encode() + b'","consumeType":"CONSUME_PASSIVELY",'
                 b'"messageModel":"CLUSTERING","consumeFromWhere":"CONSUME_FROM_FIRST_OFFSET","unitMode":false,'
                 b'"subscriptionDataSet":[{"topic":"' + TOPIC.encode() + b'","subString":"TagA || TagB",'
                 b'"classFilterMode":false,"tagsSet":["TagA","TagB"],"codeSet":[2598919,2598920],'
                 b'"subVersion":1,"expressionType":"TAG"}]}]}')
    heartbeat_cpp = (b'{"clientID":"cpp@fuzz","consumerDataSet":[{"groupName":"' + GROUP.encode() +
                     b'","consumeType":1,"messageModel":1,"consumeFromWhere":0,'
                     b'"subscriptionDataSet":[{"topic":"' + TOPIC.encode() + b'","subString":"*","codeSet":[0,0]}]}],'
                     b'"producerDataSet":[]}')
    lock = (b'{"consumerGroup":"' + GROUP.encode() + b'","clientId":"127.0.0.1@fuzz","mqSet":[{"topic":"'
            + TOPIC.encode() + b'","brokerName":"broker-a","queueId":0},{"topic":"' + TOPIC.encode()
            + b'","brokerName":"broker-a","queueId":1}]}')
    q = {"topic": TOPIC, "queueId": "2"}
    commands = [
        _req(RequestCode.SEND_MESSAGE_V2, v2, b"hello fuzz"),
        _req(RequestCode.SEND_MESSAGE, v1, b"x" * 200),
        _req(RequestCode.SEND_BATCH_MESSAGE, batch_ext, batch_body),
        _req(RequestCode.SEND_MESSAGE_V2, dict(v2, f="4", i="TRAN_MSG\x01true\x02PGROUP\x01fuzz-producer\x02"), b"half"),
        _req(RequestCode.SEND_MESSAGE_V2, dict(v2, i="DELAY\x013\x02"), b"later"),
        _req(RequestCode.SEND_MESSAGE_V2, dict(v2, b="%RETRY%" + GROUP, j="2", l="16"), b"retry"),
        _req(RequestCode.PULL_MESSAGE, pull),
        _req(RequestCode.PULL_MESSAGE, dict(pull, sysFlag="7", suspendTimeoutMillis="200", commitOffset="1",
                                            queueOffset="1000")),
        _req(RequestCode.PULL_MESSAGE, dict(pull, sysFlag="4", subscription="a > 5 AND b = 'x'",
                                            expressionType="SQL92")),
        _req(RequestCode.PULL_MESSAGE, dict(pull, sysFlag="4", subscription="TagA || TagB")),
        _req(RequestCode.QUERY_CONSUMER_OFFSET, {"consumerGroup": GROUP, **q}),
        _req(RequestCode.UPDATE_CONSUMER_OFFSET, {"consumerGroup": GROUP, **q, "commitOffset": "3"}),
        _req(RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, {**q, "timestamp": now}),
        _req(RequestCode.GET_MAX_OFFSET, q),
        _req(RequestCode.GET_MIN_OFFSET, q),
        _req(RequestCode.GET_EARLIEST_MSG_STORETIME, q),
        _req(RequestCode.HEART_BEAT, {}, heartbeat),
        _req(RequestCode.HEART_BEAT, {}, heartbeat_cpp),
        _req(RequestCode.UNREGISTER_CLIENT, {"clientID": "127.0.0.1@fuzz", "producerGroup": "fuzz-producer",
                                             "consumerGroup": GROUP}),
        _req(RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": GROUP}),
        _req(RequestCode.CONSUMER_SEND_MSG_BACK, {"offset": "0", "group": GROUP, "delayLevel": "0",
                                                  "originMsgId": "C0A80001000018B4AAC2", "originTopic": TOPIC,
                                                  "unitMode": "false", "maxReconsumeTimes": "16"}),
        _req(RequestCode.END_TRANSACTION, {"producerGroup": "fuzz-producer", "tranStateTableOffset": "0",
                                           "commitLogOffset": "0", "commitOrRollback": "8",
                                           "msgId": "7F00000100002A9F0000000000000000",
                                           "fromTransactionCheck": "false", "transactionId": "abc"}),
        _req(RequestCode.LOCK_BATCH_MQ, {}, lock),
        _req(RequestCode.UNLOCK_BATCH_MQ, {}, lock),
        _req(RequestCode.QUERY_MESSAGE, {"topic": TOPIC, "key": "k1", "maxNum": "32", "beginTimestamp": "0",
                                         "endTimestamp": "9223372036854775807"}),
        _req(RequestCode.VIEW_MESSAGE_BY_ID, {"offset": "0"}),
        _req(RequestCode.GET_ALL_TOPIC_CONFIG),
        _req(RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG),
        _req(RequestCode.GET_BROKER_RUNTIME_INFO),
        _req(RequestCode.GET_BROKER_CONFIG),
        _req(RequestCode.GET_TOPIC_STATS_INFO, {"topic": TOPIC}),
        _req(RequestCode.GET_CONSUME_STATS, {"consumerGroup": GROUP, "topic": TOPIC}),
        _req(RequestCode.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": GROUP}),
        _req(RequestCode.GET_PRODUCER_CONNECTION_LIST, {"producerGroup": "fuzz-producer"}),
        _req(RequestCode.QUERY_TOPIC_CONSUME_BY_WHO, {"topic": TOPIC}),
        _req(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, {"topic": TOPIC, "group": GROUP, "timestamp": "0",
                                                         "isForce": "true"}),
        _req(RequestCode.CLONE_GROUP_OFFSET, {"srcGroup": GROUP, "destGroup": GROUP, "topic": TOPIC,
                                              "offline": "false"}),
        _req(RequestCode.DELETE_SUBSCRIPTIONGROUP, {"groupName": "no-such-group", "removeOffset": "true"}),
        _req(9999, {"any": "thing"}, b"body"),
        _req(RequestCode.GET_MAX_OFFSET, q, flag=FLAG_ONEWAY),
        _req(RequestCode.SEND_MESSAGE_V2, v2, b"response?", flag=FLAG_RESPONSE),
    ]
    remark = _req(RequestCode.GET_MIN_OFFSET, q)
    remark.remark = "a remark \u00e9"
    remark.language = LanguageCode.CPP
    commands.append(remark)
    return _both_serializations(commands)


def namesrv_corpus() -> list[Sample]:
    register_body = (b'{"topicConfigSerializeWrapper":{"topicConfigTable":{"' + TOPIC.encode() + b'":{"topicName":"'
                     + TOPIC.encode() + b'","readQueueNums":4,"writeQueueNums":4,"perm":6,'
                     b'"topicFilterType":"SINGLE_TAG","topicSysFlag":0,"order":false}},'
                     b'"dataVersion":{"timestamp":1700000000000,"counter":1}},"filterServerList":[]}')
    broker = {"brokerName": "broker-b", "brokerAddr": "127.0.0.1:10999", "clusterName": "DefaultCluster",
              "haServerAddr": "", "brokerId": "0", "compressed": "false"}
    commands = [
        _req(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": TOPIC}),
        _req(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "TBW102"}),
        _req(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "%RETRY%" + GROUP}),
        _req(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "no-such-topic"}),
        _req(RequestCode.GET_BROKER_CLUSTER_INFO),
        _req(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER),
        _req(RequestCode.GET_TOPICS_BY_CLUSTER, {"cluster": "DefaultCluster"}),
        _req(RequestCode.GET_KV_CONFIG, {"namespace": "ORDER_TOPIC_CONFIG", "key": TOPIC}),
        _req(RequestCode.REGISTER_BROKER, broker, register_body),
        _req(RequestCode.UNREGISTER_BROKER, broker),
        _req(RequestCode.QUERY_DATA_VERSION, broker, b'{"timestamp":1700000000000,"counter":1}'),
        _req(RequestCode.PUT_KV_CONFIG, {"namespace": "n", "key": "k", "value": "v"}),
    ]
    return _both_serializations(commands)


_JSON_KEYS = ("code", "language", "version", "opaque", "flag", "remark", "extFields", "serializeTypeCurrentRPC")


def _random_json(rng: random.Random, depth: int = 0) -> Any:
    kind = rng.randrange(9 if depth < 3 else 6)
    if kind == 0:
        return rng.choice([0, 1, -1, 2**31 - 1, -2**31, 2**31, 2**63, -2**63 - 1, rng.randrange(-1000, 1000)])
    if kind == 1:
        return rng.choice(["", "JAVA", "CPP", "10", "-1", "x" * rng.randrange(64), "\u00e9\u4e2d", "\ud7ff"])
    if kind == 2:
        return rng.choice([True, False, None])
    if kind == 3:
        return rng.choice([0.5, -1e300, 1e18, 2147483647.0])
    if kind in (4, 5):
        return rng.randrange(-2**31, 2**31)
    if kind == 6:
        return [_random_json(rng, depth + 1) for _ in range(rng.randrange(4))]
    keys = list(_JSON_KEYS) + ["topic", "queueId", "a", "b", "consumerGroup", "", "x" * 10]
    return {rng.choice(keys): _random_json(rng, depth + 1) for _ in range(rng.randrange(6))}


def remoting_random_frame(rng: random.Random) -> bytes:
    """A frame whose lengths are right and whose header and body are random."""
    kind = rng.randrange(4)
    if kind == 0:  # a JSON header of the right keys with random values
        obj = {key: _random_json(rng) for key in _JSON_KEYS if rng.random() < 0.7}
        if rng.random() < 0.8:
            obj["code"] = rng.choice([10, 11, 14, 15, 28, 30, 34, 36, 37, 41, 105, 106, 310, 320, rng.randrange(400)])
        if rng.random() < 0.5:
            obj["extFields"] = {rng.choice(["topic", "queueId", "a", "b", "e", "consumerGroup", "offset", "key"]):
                                _random_json(rng, 2) for _ in range(rng.randrange(6))}
        header, stype = json.dumps(obj).encode(), 0
    elif kind == 1:  # a binary header with random fields and mostly consistent lengths
        remark = rng.randbytes(rng.randrange(8))
        ext = b"".join(struct.pack(">h", len(k)) + k + struct.pack(">i", len(v)) + v
                       for k, v in ((rng.randbytes(rng.randrange(6)), rng.randbytes(rng.randrange(10)))
                                    for _ in range(rng.randrange(4))))
        header = struct.pack(">hBhii", rng.randrange(-2**15, 2**15), rng.randrange(256), rng.randrange(-2**15, 2**15),
                             rng.randrange(-2**31, 2**31), rng.randrange(-2**31, 2**31))
        header += struct.pack(">i", len(remark)) + remark + struct.pack(">i", len(ext)) + ext
        stype = 1
    else:
        header, stype = rng.randbytes(rng.randrange(40)), rng.choice([0, 1, rng.randrange(256)])
    body = rng.randbytes(rng.choice([0, 0, rng.randrange(64), rng.randrange(2048)]))
    return _remoting_wrap(stype)((header, body))


class RemotingStream:
    """Where the broker stops reading a remoting connection: the session's own decoder."""

    def __init__(self) -> None:
        self.conn = RemotingConnection()

    def feed(self, data: bytes) -> bool:
        self.conn.receive_raw(data)
        return not self.conn.failed and not self.conn.buffered


def _remoting_probe(code: int, ext: dict[str, str]) -> Callable[[int, float], None]:
    def probe(port: int, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        command = _req(code, ext, opaque=424242)
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
            sock.sendall(b"".join(bytes(part) for part in encode_command(command)))
            conn = RemotingConnection()
            while True:
                sock.settimeout(max(0.001, deadline - time.monotonic()))
                chunk = sock.recv(65536)
                if not chunk:
                    raise ConnectionError("closed without an answer")
                for event in conn.receive_data(chunk):
                    if isinstance(event, CommandReceived) and event.command.opaque == 424242 \
                            and event.command.flag & FLAG_RESPONSE:
                        return
    return probe


# ------------------------------------------------------------------ kafka
def _kafka_wrap(parts: Sequence[bytes]) -> bytes:
    return _SIZE.pack(len(parts[0])) + parts[0]


def kafka_request(api_key: int, version: int, body: dict[str, Any], correlation: int = 7,
                  client_id: str | None = "fuzz") -> bytes:
    return codec.encode_request_header(api_key, version, correlation, client_id) + b"".join(
        bytes(part) for part in codec.encode_request(api_key, version, body))


_BATCH_CRC_START = 21  # attributes onward: what the CRC32C covers


def _batch_wrap(api_version: int, make_body: Callable[[bytes], dict[str, Any]]) -> Wrap:
    """A Produce whose record batch is the mutated part: the batch length and CRC32C are
    set again around it, so mutations reach record decoding and the store."""
    def wrap(parts: Sequence[bytes]) -> bytes:
        inner = parts[0]
        head = struct.pack(">qiib", 0, 4 + 1 + 4 + len(inner), -1, 2)
        batch = head + struct.pack(">I", crc32c(inner)) + inner
        return _kafka_wrap((kafka_request(ApiKey.PRODUCE, api_version, make_body(batch)),))
    return wrap


def _batches() -> list[bytes]:
    now = int(time.time() * 1000)
    plain = [Record(i, i, b"key-%d" % i if i % 2 else None, b"value-%d" % i * (i + 1),
                    [("tag", b"TagA")] if i == 1 else []) for i in range(4)]
    out = [build_batch(plain, base_timestamp=now)]
    for compression in (1, 2, 3, 4):  # gzip, snappy, lz4, zstd
        out.append(build_batch(plain, base_timestamp=now, compression=compression))
    out.append(build_batch(plain[:2], base_timestamp=now, producer_id=1000, producer_epoch=0, base_sequence=0))
    return out


def _templates(batch: bytes) -> dict[int, list[dict[str, Any]]]:
    """Realistic request bodies per API (fields a version lacks are dropped by the encoder)."""
    t = TOPIC
    produce = {"transactional_id": None, "acks": 1, "timeout_ms": 1000,
               "topic_data": [{"name": t, "partition_data": [{"index": 1, "records": batch}]}]}
    fetch_part = {"partition": 0, "current_leader_epoch": -1, "fetch_offset": 0, "last_fetched_epoch": -1,
                  "log_start_offset": -1, "partition_max_bytes": 65536}
    fetch = {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 1,
             "session_id": 0, "session_epoch": -1,
             "topics": [{"topic": t, "partitions": [fetch_part, dict(fetch_part, partition=3, fetch_offset=5)]}],
             "forgotten_topics_data": [], "rack_id": ""}
    protocols = [{"name": "range", "metadata": b"\x00\x01\x00\x00\x00\x01\x00\x09FuzzTopic\xff\xff\xff\xff"}]
    return {
        ApiKey.PRODUCE: [produce, dict(produce, acks=-1), dict(produce, acks=0)],
        ApiKey.FETCH: [fetch, dict(fetch, max_wait_ms=100, min_bytes=1 << 20)],
        ApiKey.LIST_OFFSETS: [{"replica_id": -1, "isolation_level": 0, "topics": [{"name": t, "partitions": [
            {"partition_index": 0, "current_leader_epoch": -1, "timestamp": ts, "max_num_offsets": 1}
            for ts in (-1, -2, 0)]}]}],
        ApiKey.METADATA: [{"topics": [{"topic_id": bytes(16), "name": t}], "allow_auto_topic_creation": True,
                           "include_cluster_authorized_operations": False,
                           "include_topic_authorized_operations": True},
                          {"topics": None, "allow_auto_topic_creation": False}],
        ApiKey.OFFSET_COMMIT: [{"group_id": GROUP, "generation_id_or_member_epoch": -1, "member_id": "",
                                "group_instance_id": None, "retention_time_ms": -1, "topics": [
                                    {"name": t, "partitions": [{"partition_index": 0, "committed_offset": 1,
                                                                "committed_leader_epoch": -1,
                                                                "committed_metadata": "m"}]}]}],
        ApiKey.OFFSET_FETCH: [{"group_id": GROUP, "topics": [{"name": t, "partition_indexes": [0, 1]}],
                               "groups": [{"group_id": GROUP, "topics": [{"name": t, "partition_indexes": [0]}]}],
                               "require_stable": False},
                              {"group_id": GROUP, "topics": None, "groups": [{"group_id": GROUP, "topics": None}]}],
        ApiKey.FIND_COORDINATOR: [{"key": GROUP, "key_type": 0, "coordinator_keys": [GROUP, "other"]}],
        ApiKey.JOIN_GROUP: [{"group_id": GROUP, "session_timeout_ms": 6000, "rebalance_timeout_ms": 300,
                             "member_id": "", "group_instance_id": None, "protocol_type": "consumer",
                             "protocols": protocols, "reason": None}],
        ApiKey.HEARTBEAT: [{"group_id": GROUP, "generation_id": 1, "member_id": "m-1", "group_instance_id": None}],
        ApiKey.LEAVE_GROUP: [{"group_id": GROUP, "member_id": "m-1",
                              "members": [{"member_id": "m-1", "group_instance_id": None, "reason": None}]}],
        ApiKey.SYNC_GROUP: [{"group_id": GROUP, "generation_id": 1, "member_id": "m-1", "group_instance_id": None,
                             "protocol_type": "consumer", "protocol_name": "range",
                             "assignments": [{"member_id": "m-1", "assignment": b"\x00\x01"}]}],
        ApiKey.DESCRIBE_GROUPS: [{"groups": [GROUP, "other"], "include_authorized_operations": True}],
        ApiKey.LIST_GROUPS: [{"states_filter": ["Stable", "Empty"], "types_filter": []}],
        ApiKey.API_VERSIONS: [{"client_software_name": "fuzz", "client_software_version": "1.0"}],
        ApiKey.CREATE_TOPICS: [{"topics": [{"name": "fuzz-new", "num_partitions": 1, "replication_factor": 1,
                                            "assignments": [], "configs": [{"name": "retention.ms", "value": "1"}]}],
                                "timeout_ms": 1000, "validate_only": True}],
        ApiKey.DELETE_TOPICS: [{"topics": [{"name": "no-such-topic", "topic_id": bytes(16)}],
                                "topic_names": ["no-such-topic"], "timeout_ms": 1000}],
        ApiKey.DELETE_RECORDS: [{"topics": [{"name": t, "partitions": [{"partition_index": 2, "offset": 0}]}],
                                 "timeout_ms": 1000}],
        ApiKey.INIT_PRODUCER_ID: [{"transactional_id": None, "transaction_timeout_ms": 60000, "producer_id": -1,
                                   "producer_epoch": -1},
                                  {"transactional_id": "tx", "transaction_timeout_ms": 60000}],
        ApiKey.DESCRIBE_CONFIGS: [{"resources": [{"resource_type": 2, "resource_name": t,
                                                  "configuration_keys": None},
                                                 {"resource_type": 4, "resource_name": "0",
                                                  "configuration_keys": ["num.partitions"]}],
                                   "include_synonyms": False, "include_documentation": False}],
        ApiKey.CREATE_PARTITIONS: [{"topics": [{"name": t, "count": PARTITIONS, "assignments": None}],
                                    "timeout_ms": 1000, "validate_only": True}],
        ApiKey.SASL_HANDSHAKE: [{"mechanism": "PLAIN"}],
        ApiKey.SASL_AUTHENTICATE: [{"auth_bytes": b"\x00user\x00secret"}],
    }


_INT_BOUNDS = {"int8": 7, "int16": 15, "int32": 31, "int64": 63}


def _random_value(rng: random.Random, kind: str, f: Field, version: int) -> Any:
    if codec._in(f.nullable, version) and rng.random() < 0.2:
        return None
    if kind in _INT_BOUNDS:
        bits = _INT_BOUNDS[kind]
        return rng.choice([0, 1, -1, 2**bits - 1, -2**bits, rng.randrange(-2**bits, 2**bits)])
    if kind == "uint16":
        return rng.randrange(2**16)
    if kind == "float64":
        return rng.uniform(-1e9, 1e9)
    if kind == "bool":
        return rng.random() < 0.5
    if kind == "string":
        return rng.choice(["", TOPIC, GROUP, "x" * rng.randrange(20), "\u00e9"])
    if kind in ("bytes", "records"):
        return rng.randbytes(rng.randrange(40))
    if kind == "uuid":
        return rng.randbytes(16)
    if kind == "struct":
        return random_message(rng, f.fields, version)
    if kind == "[]":
        return [random_message(rng, f.fields, version) for _ in range(rng.randrange(3))]
    return [_random_value(rng, kind[2:], Field(f.name, kind[2:], f.versions), version) for _ in range(rng.randrange(3))]


def random_message(rng: random.Random, fields: tuple[Field, ...], version: int) -> dict[str, Any]:
    """Random values of the right types for every field of ``version``."""
    return {f.name: _random_value(rng, f.type, f, version) for f in fields if codec._in(f.versions, version)}


def _kafka_encoder(api_key: int, version: int) -> Callable[[dict[str, Any]], bytes]:
    return lambda body: _kafka_wrap((kafka_request(api_key, version, body),))


def kafka_corpus() -> list[Sample]:
    rng = random.Random(0)
    samples: list[Sample] = []
    batches = _batches()
    for key, api in sorted(APIS.items()):
        low, high = api.versions
        for version in range(low, high + 1):
            bodies = list(_templates(batches[0]).get(key, []))
            bodies += [random_message(rng, api.request, version) for _ in range(2)]
            for body in bodies:
                try:
                    frame = kafka_request(key, version, body)
                except (ValueError, TypeError, struct.error, AttributeError):
                    continue  # a template value this version cannot carry (null where not nullable)
                if key == ApiKey.DELETE_TOPICS:  # a value mutation would name and delete the fuzz topic
                    samples.append(Sample((frame,), _kafka_wrap))
                    continue
                samples.append(Sample((frame,), _kafka_wrap, body, _kafka_encoder(key, version)))
            if key == ApiKey.PRODUCE and version >= 3:
                for batch in batches:
                    def make_body(records: bytes, acks: int = 1) -> dict[str, Any]:
                        return {"transactional_id": None, "acks": acks, "timeout_ms": 1000, "topic_data": [
                            {"name": TOPIC, "partition_data": [{"index": 2, "records": records}]}]}
                    samples.append(Sample((batch[_BATCH_CRC_START:],), _batch_wrap(version, make_body)))
    # ApiVersions beyond the served versions (answered UNSUPPORTED_VERSION, connection kept)
    samples.append(Sample((codec.encode_request_header(ApiKey.API_VERSIONS, 99, 7, "fuzz") + b"\x00\x00",),
                          _kafka_wrap))
    samples.append(Sample((kafka_request(ApiKey.METADATA, 4, {"topics": None}, client_id=None),), _kafka_wrap))
    return samples


_SERVED = sorted(APIS)


def kafka_random_frame(rng: random.Random) -> bytes:
    """A frame with a plausible request header and a random body."""
    key = rng.choice(_SERVED) if rng.random() < 0.9 else rng.randrange(-3, 80)
    api = APIS.get(key)
    version = rng.randrange(api.versions[0], api.versions[1] + 1) if api and rng.random() < 0.9 \
        else rng.randrange(-2, 20)
    client = rng.choice([None, "", "fuzz", "c" * rng.randrange(100)])
    header = codec.encode_request_header(key, version, rng.randrange(-2**31, 2**31), client)
    if rng.random() < 0.3 and header.endswith(b"\x00") and codec.request_header_version(key, version) >= 2:
        header = header[:-1] + rng.choice([b"\x01\x00\x00", b"\x01\x05\x10", b"\xff\xff\xff\xff\x7f", b"\x02"])
    return _kafka_wrap((header + rng.randbytes(rng.choice([0, rng.randrange(16), rng.randrange(512)])),))


class KafkaStream:
    """Where the broker stops reading a Kafka connection: a bad frame, or any unsupported
    API but ApiVersions (the session closes the connection for those)."""

    def __init__(self) -> None:
        self.conn = KafkaServerConnection()

    def feed(self, data: bytes) -> bool:
        for event in self.conn.receive_data(data):
            if type(event) is BadRequest:
                return False
            if type(event) is UnsupportedVersion and event.api_key != ApiKey.API_VERSIONS:
                return False
        return not self.conn.closed and not self.conn._pending_len


def kafka_probe(port: int, timeout: float) -> None:
    """Metadata v1 for the fuzz topic: the response must arrive and decode."""
    deadline = time.monotonic() + timeout
    payload = kafka_request(ApiKey.METADATA, 1, {"topics": [{"name": TOPIC}]}, correlation=424242)
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(_SIZE.pack(len(payload)) + payload)
        data = b""
        while len(data) < 4 or len(data) < 4 + _SIZE.unpack_from(data)[0]:
            sock.settimeout(max(0.001, deadline - time.monotonic()))
            chunk = sock.recv(65536)
            if not chunk:
                raise ConnectionError("closed without an answer")
            data += chunk
    frame = memoryview(data)[4:4 + _SIZE.unpack_from(data)[0]]
    correlation, pos = codec.decode_response_header(ApiKey.METADATA, 1, frame)
    codec.decode_response(ApiKey.METADATA, 1, frame[pos:])
    if correlation != 424242:
        raise ConnectionError(f"answer to correlation id {correlation}")


# ------------------------------------------------------------------ STOMP, Web-STOMP, AMQP, HTTP, TLS
# Text and handshake protocols: their corpus is the well-formed openings of
# tests/support/hostile_inputs.py (no structure-aware parts), one connection per input.
def _openings(name: str) -> Callable[[], list[Sample]]:
    return lambda: [whole(seed) for seed in opening_seeds()[name]]


def _exchange(port: int, timeout: float, request: bytes, expect: bytes, context: ssl.SSLContext | None = None) -> None:
    """Send ``request`` and read until ``expect`` arrives (else OSError: a hang or a close)."""
    deadline = time.monotonic() + timeout
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as raw:
        sock = context.wrap_socket(raw, server_hostname="localhost") if context is not None else raw
        sock.sendall(request)
        data = b""
        while expect not in data:
            sock.settimeout(max(0.001, deadline - time.monotonic()))
            chunk = sock.recv(65536)
            if not chunk:
                raise ConnectionError(f"closed without {expect!r}")
            data += chunk


_STOMP_CONNECT = b"CONNECT\naccept-version:1.2\nhost:/\nlogin:guest\npasscode:guest\n\n\x00"
TLS_CONTEXT: list[ssl.SSLContext] = []  # the client context of the broker's throwaway CA (BrokerProcess)


def stomp_probe(port: int, timeout: float) -> None:
    _exchange(port, timeout, _STOMP_CONNECT, b"CONNECTED")


def ws_probe(port: int, timeout: float) -> None:
    _exchange(port, timeout, opening_seeds()["ws"][0].split(b"\r\n\r\n")[0] + b"\r\n\r\n", b"101 Switching")


def amqp_probe(port: int, timeout: float) -> None:
    _exchange(port, timeout, b"AMQP\x00\x00\x09\x01", b"PLAIN")  # connection.start names its mechanisms


def http_probe(port: int, timeout: float) -> None:
    _exchange(port, timeout, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", b"HTTP/1.1 200")


def tls_probe(port: int, timeout: float) -> None:
    """A TLS handshake on the STOMP TLS port, then a CONNECT answered."""
    _exchange(port, timeout, _STOMP_CONNECT, b"CONNECTED", TLS_CONTEXT[0])


# ------------------------------------------------------------------ the front-end table
@dataclass(frozen=True, slots=True)
class FrontEnd:
    name: str
    port_key: str  # the broker setting holding its port
    corpus: Callable[[], list[Sample]]
    probe: Callable[[int, float], None]  # raises unless a well-formed request is answered in time
    random_frame: Callable[[random.Random], bytes] | None = None
    stream: Callable[[], Any] | None = None  # .feed(bytes) -> may another input follow on this connection


FRONT_ENDS: dict[str, FrontEnd] = {
    "remoting": FrontEnd("remoting", "listenPort", remoting_corpus,
                         _remoting_probe(RequestCode.GET_BROKER_RUNTIME_INFO, {}),
                         remoting_random_frame, RemotingStream),
    "namesrv": FrontEnd("namesrv", "namesrv.port", namesrv_corpus,
                        _remoting_probe(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": TOPIC}),
                        remoting_random_frame, RemotingStream),
    "kafka": FrontEnd("kafka", "kafka.port", kafka_corpus, kafka_probe, kafka_random_frame, KafkaStream),
    "stomp": FrontEnd("stomp", "stomp.port", _openings("stomp"), stomp_probe),
    "ws": FrontEnd("ws", "stomp.wsPort", _openings("ws"), ws_probe),
    "amqp": FrontEnd("amqp", "amqp.port", _openings("amqp"), amqp_probe),
    "http": FrontEnd("http", "http.port", _openings("http"), http_probe),
    "tls": FrontEnd("tls", "stomp.tlsPort", _openings("tls"), tls_probe),
}


# ------------------------------------------------------------------ mutations
_INTERESTING_8 = (0, 1, 0x7F, 0x80, 0xFF, 0x20, 0x22, 0x5C, 0x7B, 0x00)
_INTERESTING_INTS = (0, 1, -1, 2, 0x7F, 0x80, 0xFF, 0x7FFF, 0x8000, 0xFFFF, 0xFFFFFF, 0x1000000, 0x1010000,
                     0x7FFFFFFF, -0x80000000, 0x6400000, 0x6400001, 0x10000, 4, 8, 64)
_JSON_TOKEN = re.compile(rb'"(?:[^"\\]|\\.){0,200}"|-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?|true|false|null')
_JSON_LITERALS = (b'""', b"-1", b"0", b"2147483648", b"-2147483649", b"9223372036854775808", b"1e400", b"1.5",
                  b"-0", b"null", b"true", b"false", b"[]", b"{}", b'"\\ud800"', b'"\\u0000"', b'" 12 "',
                  b'"' + b"A" * 70000 + b'"', b"[" * 600 + b"]" * 600, b'{"a":' * 300 + b"1" + b"}" * 300,
                  b'"%RETRY%x"', b'"TBW102"', b'"' + TOPIC.encode() + b'"', b'"\x01\x02"', b"123456789012345678901234567890",
                  b'"\\' * 30_000)  # an open string: the lenient JSON fallback once took minutes on it


_EDGE_INTS = (0, 1, -1, -2, -3, 2, 7, 127, 128, 255, 256, 0x7FFF, -0x8000, 0xFFFF, 0x7FFFFFFF, -0x80000000,
              0x80000000, 0x7FFFFFFFFFFFFFFF, -0x8000000000000000, 1 << 64, 1_000_000, 1 << 24)
_EDGE_STRINGS = ("", " ", "x" * 256, "y" * 40_000, "\u00e9\u4e2d", "\x00", "\x01\x02", "\ud800", TOPIC, TOPIC + "x",
                 GROUP, "%RETRY%" + GROUP, "%DLQ%" + GROUP, "TBW102", "SCHEDULE_TOPIC_XXXX", "RMQ_SYS_TRANS_HALF_TOPIC",
                 "*", "a > ", "a BETWEEN 1 AND", "TagA || ", "-1", "0", "2147483648", "9223372036854775808", "1e3",
                 " 12 ", "true", "null", "../../etc/passwd", "127.0.0.1:1", "C0A80001000018B4AAC2",
                 "7F00000100002A9F00000000000000FF", "TAGS\x01a\x02KEYS\x01\x02")


def _larger_than(value: Any, limit: int) -> bool:
    """Whether ``value`` would encode to more than about ``limit`` bytes (walks at most that
    much): repeated lists of long strings must not be encoded to find out."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack.extend(item.values())
            limit -= 8 * len(item)
        elif isinstance(item, list):
            stack.extend(item)
            limit -= 8 * len(item)
        elif isinstance(item, (str, bytes, bytearray, memoryview)):
            limit -= len(item)
        if limit < 0:
            return True
    return False


def mutate_value(rng: random.Random, value: Any, depth: int = 0) -> Any:
    """A copy of ``value`` with one leaf (or one list or one key) changed to an edge value."""
    if isinstance(value, dict) and value:
        out = dict(value)
        key = rng.choice(list(out))
        r = rng.random()
        if r < 0.05 and depth < 3:
            del out[key]
        elif r < 0.08:
            out[rng.choice(("x", "topic", "queueId", "", key + "2"))] = rng.choice(_EDGE_STRINGS)
        else:
            out[key] = mutate_value(rng, out[key], depth + 1)
        return out
    if isinstance(value, list):
        r = rng.random()
        if not value or r < 0.25:
            factor = min(rng.choice((2, 16, 500, 500, 20_000)), max(1, 20_000 // max(1, len(value))))
            return rng.choice(([], None, value * factor, value[:-1]))
        out = list(value)
        i = rng.randrange(len(out))
        out[i] = mutate_value(rng, out[i], depth + 1)
        return out
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return rng.choice(_EDGE_INTS + (value + 1, value - 1, value * 1000, -value))
    if isinstance(value, str):
        return rng.choice(_EDGE_STRINGS)
    if isinstance(value, (bytes, bytearray, memoryview)):
        value = bytes(value)
        return rng.choice((b"", None, rng.randbytes(rng.randrange(1, 64)), value + rng.randbytes(8),
                           value[:rng.randrange(len(value) + 1)], bytes(100_000)))
    if isinstance(value, float):
        return rng.choice((0.0, -1.0, 1e308, float("inf")))
    return rng.choice(("", 0, [], b"", None))


class Mutator:
    """Inputs for one front-end: mutations of its corpus, random frames, random bytes."""

    def __init__(self, rng: random.Random, corpus: list[Sample],
                 random_frame: Callable[[random.Random], bytes] | None) -> None:
        self.rng = rng
        self.corpus = corpus
        self.random_frame = random_frame
        self.with_values = [sample for sample in corpus if sample.value is not None]
        self._ops = (self._flip, self._flip, self._set_byte, self._insert, self._delete, self._int_field,
                     self._int_field, self._truncate, self._splice, self._repeat, self._json_token, self._json_token,
                     self._varint_bomb)

    def next(self) -> bytes:
        rng = self.rng
        r = rng.random()
        if r < 0.04:
            return rng.choice(self.corpus).frame
        if r < 0.30 and self.with_values:
            frame = self.mutate_value(rng.choice(self.with_values))
            if frame is not None:
                return frame
        if r < 0.80:
            return self.mutate(rng.choice(self.corpus))
        if r < 0.92 and self.random_frame is not None:
            frame = self.random_frame(rng)
            return self.havoc(frame) if rng.random() < 0.3 else frame
        return rng.randbytes(rng.choice([rng.randrange(1, 16), rng.randrange(1, 64), rng.randrange(1, 4096)]))

    def mutate(self, sample: Sample) -> bytes:
        rng = self.rng
        if rng.random() < 0.5:  # one part, lengths and checksums rebuilt around it
            parts = list(sample.parts)
            i = rng.randrange(len(parts))
            parts[i] = self.havoc(parts[i])
            return sample.wrap(parts)
        data = self.havoc(sample.frame)
        if rng.random() < 0.1:  # the frame's own length made wrong or huge
            data = self._length_prefix(data)
        return data

    def mutate_value(self, sample: Sample) -> bytes | None:
        """The sample with one field changed and encoded again (None if no try encodes)."""
        for _ in range(4):
            value = sample.value
            for _ in range(self.rng.choice((1, 1, 1, 2, 3))):
                value = mutate_value(self.rng, value)
            if _larger_than(value, 1 << 20):
                continue
            try:
                frame = sample.encode(value)  # type: ignore[misc]
            except (ValueError, TypeError, KeyError, AttributeError, OverflowError, struct.error):
                continue  # a value of a kind or range this field cannot carry
            if len(frame) <= 1 << 20:
                return frame
        return None

    def havoc(self, data: bytes) -> bytes:
        buf = bytearray(data)
        ops = self._ops
        for _ in range(self.rng.choice((1, 1, 1, 2, 2, 3, 4))):
            buf = self.rng.choice(ops)(buf)
        return bytes(buf)

    # each operation takes and returns a bytearray (possibly the same one)
    def _flip(self, buf: bytearray) -> bytearray:
        if buf:
            for _ in range(self.rng.randrange(1, 4)):
                buf[self.rng.randrange(len(buf))] ^= 1 << self.rng.randrange(8)
        return buf

    def _set_byte(self, buf: bytearray) -> bytearray:
        if buf:
            value = self.rng.choice(_INTERESTING_8) if self.rng.random() < 0.5 else self.rng.randrange(256)
            buf[self.rng.randrange(len(buf))] = value
        return buf

    def _insert(self, buf: bytearray) -> bytearray:
        at = self.rng.randrange(len(buf) + 1)
        buf[at:at] = self.rng.randbytes(self.rng.choice((1, 1, 2, 4, self.rng.randrange(1, 64))))
        return buf

    def _delete(self, buf: bytearray) -> bytearray:
        if buf:
            at = self.rng.randrange(len(buf))
            del buf[at:at + self.rng.choice((1, 1, 2, 4, self.rng.randrange(1, 64)))]
        return buf

    def _int_field(self, buf: bytearray) -> bytearray:
        width = self.rng.choice((1, 2, 4, 4, 4, 8))
        if len(buf) < width:
            return buf
        at = self.rng.randrange(len(buf) - width + 1)
        # favour the places lengths live: the first bytes of a frame or part
        if self.rng.random() < 0.3:
            at = self.rng.randrange(min(len(buf) - width, 24) + 1)
        value = self.rng.choice(_INTERESTING_INTS + (len(buf), len(buf) - at, len(buf) + 1))
        if self.rng.random() < 0.3:
            value += self.rng.choice((-1, 1))
        buf[at:at + width] = (value % (1 << (8 * width))).to_bytes(width, "big")
        return buf

    def _truncate(self, buf: bytearray) -> bytearray:
        return buf[:self.rng.randrange(len(buf) + 1)]

    def _splice(self, buf: bytearray) -> bytearray:
        other = self.rng.choice(self.corpus).frame
        return buf[:self.rng.randrange(len(buf) + 1)] + other[self.rng.randrange(len(other) + 1):]

    def _repeat(self, buf: bytearray) -> bytearray:
        if not buf:
            return buf
        at = self.rng.randrange(len(buf))
        chunk = buf[at:at + self.rng.randrange(1, 32)]
        buf[at:at] = chunk * self.rng.choice((2, 4, 16, 256))
        return buf

    def _json_token(self, buf: bytearray) -> bytearray:
        if len(buf) > 8192 or b'"' not in buf:
            return self._flip(buf)
        tokens = list(_JSON_TOKEN.finditer(buf))
        if not tokens:
            return buf
        token = self.rng.choice(tokens)
        return buf[:token.start()] + self.rng.choice(_JSON_LITERALS) + buf[token.end():]

    def _varint_bomb(self, buf: bytearray) -> bytearray:
        at = self.rng.randrange(len(buf) + 1)
        buf[at:at] = self.rng.choice((b"\xff", b"\x80")) * self.rng.randrange(1, 12)
        return buf

    def _length_prefix(self, data: bytes) -> bytes:
        value = self.rng.choice((len(data) - 5, len(data) - 3, len(data), len(data) + 1, len(data) + 1000, 0, 3, -1,
                                 -0x80000000, 0x7FFFFFFF, 16 << 20, (16 << 20) + (64 << 10), (16 << 20) + (64 << 10) + 1,
                                 100 << 20, (100 << 20) + 1))
        return _SIZE.pack(value) + data[4:]


# ------------------------------------------------------------------ the broker process
def proc_status(pid: int) -> dict[str, int]:
    """The kB figures of /proc/PID/status (VmRSS, RssAnon, ...)."""
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            parts = value.split()
            if len(parts) == 2 and parts[1] == "kB":
                out[key] = int(parts[0])
    return out


class BrokerProcess:
    """`python -m rocketport broker` on a temporary store, every listener on a free port."""

    def __init__(self, workdir: str, extra: Sequence[str] = ()) -> None:
        self.workdir = workdir
        self.ports = {key: free_port() for key in ("listenPort", "namesrv.port", "kafka.port", "stomp.port",
                                                    "stomp.wsPort", "stomp.tlsPort", "amqp.port", "http.port")}
        self.pki = make_pki(os.path.join(workdir, "pki"))
        if not TLS_CONTEXT:
            TLS_CONTEXT.append(ssl.create_default_context(cafile=self.pki.ca))
        self.extra = list(extra)
        self.log_path = os.path.join(workdir, "broker.log")
        self.proc: subprocess.Popen | None = None
        self.starts = 0

    def start(self) -> None:
        settings = {
            "storePathRootDir": os.path.join(self.workdir, "store"),
            "autoCreateTopicEnable": "false",
            "defaultTopicQueueNums": str(PARTITIONS),
            "mappedFileSizeCommitLog": str(64 << 20),
            "mappedFileSizeConsumeQueue": str(20 * 4096),
            "maxHashSlotNum": "100000",
            "maxIndexNum": "400000",
            "namesrv.enabled": "true",
            "kafka.enabled": "true",
            "amqp.enabled": "true",
            "stomp.enabled": "true",
            "tls.server.certPath": self.pki.server_cert,
            "tls.server.keyPath": self.pki.server_key,
            **{key: str(port) for key, port in self.ports.items()},
        }
        args = [sys.executable, "-m", "rocketport", "broker"]
        for key, value in settings.items():
            args += ["--set", f"{key}={value}"]
        for setting in self.extra:
            args += ["--set", setting]
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=log)
        self.starts += 1
        deadline = time.monotonic() + 60
        for port in self.ports.values():
            while True:
                if self.proc.poll() is not None:
                    with open(self.log_path, "rb") as log:  # the work directory may not outlive the run
                        tail = log.read()[-2000:].decode("utf-8", "replace")
                    raise RuntimeError(f"the broker exited at start-up; the end of its log:\n{tail}")
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=1).close()
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        self.stop()
                        raise RuntimeError("the broker did not start listening") from None
                    time.sleep(0.05)

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def rss_anon_kib(self) -> int:
        return proc_status(self.proc.pid).get("RssAnon", 0)

    def log_size(self) -> int:
        try:
            return os.path.getsize(self.log_path)
        except OSError:
            return 0

    def log_since(self, offset: int) -> bytes:
        with open(self.log_path, "rb") as f:
            f.seek(offset)
            return f.read()

    def stop(self) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self.proc = None


def setup_store(broker: BrokerProcess) -> None:
    """The fuzz topic with a few messages, so pulls, fetches and lookups find something."""
    port = broker.ports["listenPort"]
    create = _req(RequestCode.UPDATE_AND_CREATE_TOPIC, {
        "topic": TOPIC, "defaultTopic": "TBW102", "readQueueNums": str(PARTITIONS),
        "writeQueueNums": str(PARTITIONS), "perm": "6", "topicFilterType": "SINGLE_TAG", "order": "false"})
    header = SendMessageRequestHeader("fuzz-producer", TOPIC, "TBW102", PARTITIONS, 0, 0, int(time.time() * 1000),
                                      0, "TAGS\x01TagA\x02KEYS\x01k1\x02")
    commands = [create]
    for i in range(4 * PARTITIONS):
        header.queue_id = i % PARTITIONS
        commands.append(_req(RequestCode.SEND_MESSAGE_V2, encode_send_message_header_v2(header), b"m%d" % i))
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        conn = RemotingConnection()
        for opaque, command in enumerate(commands, 1):
            command.opaque = opaque
            sock.sendall(b"".join(bytes(p) for p in encode_command(command)))
            answered = False
            while not answered:
                chunk = sock.recv(65536)
                if not chunk:
                    raise RuntimeError("the broker closed the set-up connection")
                answered = any(isinstance(e, CommandReceived) and e.command.opaque == opaque
                               for e in conn.receive_data(chunk))


# ------------------------------------------------------------------ driving one front-end
class _Shot(asyncio.Protocol):
    """One connection: write the inputs, half-close, read (and drop) until the broker closes."""

    __slots__ = ("payload", "done", "transport")

    def __init__(self, payload: bytes, done: asyncio.Future) -> None:
        self.payload = payload
        self.done = done
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        transport.write(self.payload)  # type: ignore[attr-defined]
        transport.write_eof()  # type: ignore[attr-defined]

    def data_received(self, data: bytes) -> None:
        pass

    def eof_received(self) -> bool:
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.done.done():
            self.done.set_result(None)


@dataclass(slots=True)
class Phase:
    name: str
    inputs: int = 0
    connections: int = 0
    crashes: int = 0
    hangs: int = 0
    stuck: int = 0  # connections the broker had not closed SHOT_TIMEOUT after our EOF
    probe_max_ms: float = 0.0
    rss_start_kib: int = 0
    rss_warm_kib: int = 0  # after a tenth of the inputs: one-off growth (caches, heap) is behind
    rss_end_kib: int = 0
    seconds: float = 0.0
    tracebacks: int = 0
    findings: list[str] = field(default_factory=list)


SHOT_TIMEOUT = 10.0


class Driver:
    def __init__(self, broker: BrokerProcess, args: argparse.Namespace) -> None:
        self.broker = broker
        self.args = args
        self.recent: collections.deque[bytes] = collections.deque(maxlen=args.keep)
        self.loop = asyncio.get_running_loop()

    async def _shot(self, port: int, payload: bytes, phase: Phase) -> None:
        done = self.loop.create_future()
        try:
            transport, _ = await self.loop.create_connection(lambda: _Shot(payload, done), "127.0.0.1", port)
        except OSError:
            return  # the broker is gone or not accepting: the next probe finds out
        timer = self.loop.call_later(SHOT_TIMEOUT, lambda: done.done() or done.set_result("stuck"))
        try:
            if await done == "stuck":
                phase.stuck += 1
                transport.abort()
                if phase.stuck <= 20:  # the broker kept the connection open after our EOF: keep its inputs
                    os.makedirs(self.args.save, exist_ok=True)
                    with open(os.path.join(self.args.save, f"{phase.name}-stuck-{phase.stuck}.bin"), "wb") as f:
                        f.write(payload)
        finally:
            timer.cancel()

    def _payload(self, fe: FrontEnd, mutator: Mutator, limit: int) -> tuple[bytes, int]:
        """Inputs for one connection: while the front-end's stream says the broker reads on."""
        stream = fe.stream() if fe.stream is not None else None
        parts = []
        size = 0
        while len(parts) < limit:
            data = mutator.next()
            parts.append(data)
            size += len(data)
            if stream is None or size >= self.args.connection_bytes or not stream.feed(data):
                break
        return b"".join(parts), len(parts)

    def _probe(self, fe: FrontEnd, phase: Phase) -> None:
        port = self.broker.ports[fe.port_key]
        started = time.monotonic()
        try:
            fe.probe(port, self.args.probe_timeout)
            elapsed = time.monotonic() - started
        except (OSError, ValueError, codec.DecodeError) as exc:
            elapsed = time.monotonic() - started
            if not self.broker.alive:
                phase.crashes += 1
                self._save(fe, phase, "crash", f"exit status {self.broker.proc.returncode}")
                self.broker.start()
                return
            phase.hangs += 1
            self._save(fe, phase, "hang", repr(exc))
            if not self._recovers(fe):
                self._save(fe, phase, "hang", "no answer for 30 s: broker restarted")
                self.broker.stop()
                self.broker.start()
            return
        phase.probe_max_ms = max(phase.probe_max_ms, elapsed * 1000)
        if not self.broker.alive:
            phase.crashes += 1
            self._save(fe, phase, "crash", f"exit status {self.broker.proc.returncode}")
            self.broker.start()

    def _recovers(self, fe: FrontEnd) -> bool:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                fe.probe(self.broker.ports[fe.port_key], 5.0)
                return True
            except (OSError, ValueError, codec.DecodeError):
                if not self.broker.alive:
                    return False
                time.sleep(0.5)
        return False

    def _save(self, fe: FrontEnd, phase: Phase, kind: str, why: str) -> None:
        directory = os.path.join(self.args.save, f"{fe.name}-{kind}-{len(phase.findings) + 1}")
        os.makedirs(directory, exist_ok=True)
        for i, payload in enumerate(self.recent):
            with open(os.path.join(directory, f"conn-{i:03d}.bin"), "wb") as f:
                f.write(payload)
        with open(os.path.join(directory, "why.txt"), "w") as f:
            f.write(why + "\n")
        phase.findings.append(directory)
        print(f"fuzz: {fe.name} {kind} ({why}); last {len(self.recent)} connections' inputs in {directory}",
              file=sys.stderr, flush=True)

    async def run(self, fe: FrontEnd, inputs: int, seed: int) -> Phase:
        args = self.args
        phase = Phase(fe.name)
        rng = random.Random(f"{seed}:{fe.name}")
        mutator = Mutator(rng, fe.corpus(), fe.random_frame)
        port = self.broker.ports[fe.port_key]
        self._probe(fe, phase)
        log_offset = self.broker.log_size()
        phase.rss_start_kib = self.broker.rss_anon_kib()
        started = time.monotonic()
        running: set[asyncio.Task] = set()
        next_probe = args.batch
        warm_at = inputs // 10
        next_report = time.monotonic() + 30
        while phase.inputs < inputs:
            payload, count = self._payload(fe, mutator, min(args.per_connection, inputs - phase.inputs))
            phase.inputs += count
            phase.connections += 1
            self.recent.append(payload)
            if len(running) >= args.concurrency:
                _, running = await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)
            running.add(asyncio.ensure_future(self._shot(port, payload, phase)))
            if phase.inputs >= next_probe or phase.inputs >= inputs:
                next_probe = phase.inputs + args.batch
                await asyncio.sleep(0)  # let the connections just opened write their inputs
                self._probe(fe, phase)
                port = self.broker.ports[fe.port_key]
                if not phase.rss_warm_kib and phase.inputs >= warm_at and self.broker.alive:
                    phase.rss_warm_kib = self.broker.rss_anon_kib()
            if time.monotonic() > next_report:
                next_report += 30
                rate = phase.inputs / (time.monotonic() - started)
                rss = self.broker.rss_anon_kib() / 1024 if self.broker.alive else 0
                print(f"fuzz: {fe.name} {phase.inputs} inputs, {phase.connections} connections, {rate:,.0f}/s, "
                      f"broker RssAnon {rss:.1f} MiB", file=sys.stderr, flush=True)
        if running:
            await asyncio.wait(running)
        self._probe(fe, phase)
        phase.seconds = time.monotonic() - started
        time.sleep(1.0)  # what the last connections left behind is released
        phase.rss_end_kib = self.broker.rss_anon_kib() if self.broker.alive else 0
        phase.tracebacks = self.broker.log_since(log_offset).count(b"Traceback (most recent call last)")
        return phase


def emit(case: str, value: float, unit: str, **extra: Any) -> None:
    print(json.dumps({"bench": "fuzz", "case": case, "value": value, "unit": unit, **extra}), flush=True)


def report(phase: Phase) -> None:
    n = phase.name
    emit(f"inputs_{n}", phase.inputs, "count", connections=phase.connections)
    emit(f"crashes_{n}", phase.crashes, "count")
    emit(f"hangs_{n}", phase.hangs, "count", stuck_connections=phase.stuck)
    emit(f"rss_growth_{n}", round((phase.rss_end_kib - phase.rss_start_kib) / 1024, 1), "MiB",
         rss_start_mib=round(phase.rss_start_kib / 1024, 1), rss_end_mib=round(phase.rss_end_kib / 1024, 1),
         growth_after_first_tenth_mib=round((phase.rss_end_kib - phase.rss_warm_kib) / 1024, 1))
    emit(f"seconds_{n}", round(phase.seconds, 1), "s", inputs_per_s=round(phase.inputs / max(phase.seconds, 1e-9)))
    emit(f"probe_max_{n}", round(phase.probe_max_ms, 1), "ms")
    emit(f"tracebacks_{n}", phase.tracebacks, "count")


async def main_async(args: argparse.Namespace, broker: BrokerProcess) -> list[Phase]:
    driver = Driver(broker, args)
    phases = []
    for name in args.front_ends:
        phase = await driver.run(FRONT_ENDS[name], args.inputs, args.seed)
        report(phase)
        phases.append(phase)
    return phases


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--inputs", type=int, default=1_000_000, help="inputs per front-end")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--front-ends", default="remoting,namesrv,kafka,stomp,ws,amqp,http,tls",
                        help=f"comma-separated, of {', '.join(FRONT_ENDS)}")
    parser.add_argument("--batch", type=int, default=1000, help="inputs between probes")
    parser.add_argument("--probe-timeout", type=float, default=1.0, help="seconds a probe may take")
    parser.add_argument("--concurrency", type=int, default=8, help="connections open at once")
    parser.add_argument("--per-connection", type=int, default=100, help="at most this many inputs per connection")
    parser.add_argument("--connection-bytes", type=int, default=256 << 10, help="and about this many bytes")
    parser.add_argument("--keep", type=int, default=64, help="connections' inputs kept for a finding")
    parser.add_argument("--save", help="where findings go (default: a new temporary directory)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="extra broker setting")
    parser.add_argument("--keep-store", action="store_true", help="keep the broker's directory")
    args = parser.parse_args(argv)
    args.front_ends = [name.strip() for name in args.front_ends.split(",") if name.strip()]
    unknown = [name for name in args.front_ends if name not in FRONT_ENDS]
    if unknown:
        parser.error(f"unknown front-ends {unknown}; known: {', '.join(FRONT_ENDS)}")
    workdir = tempfile.mkdtemp(prefix="rocketport-fuzz-")
    args.save = args.save or os.path.join(workdir, "findings")
    broker = BrokerProcess(workdir, args.set)
    started = time.monotonic()
    phases: list[Phase] = []
    try:
        import uvloop
        run = uvloop.run
    except ImportError:
        run = asyncio.run
    try:
        broker.start()
        setup_store(broker)
        phases = run(main_async(args, broker))
    finally:
        broker.stop()
        found = any(p.findings or p.tracebacks for p in phases)
        keep = args.keep_store or found or not phases
        print(f"fuzz: {time.monotonic() - started:.0f} s in all"
              + (f"; broker log {broker.log_path}" if keep else ""), file=sys.stderr)
        if not keep:
            shutil.rmtree(workdir, ignore_errors=True)
    return 1 if any(p.crashes or p.hangs for p in phases) else 0


if __name__ == "__main__":
    sys.exit(main())
