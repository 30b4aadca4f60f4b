"""The crash soak's clients (bench/crash_soak.py): one producer and one reader per protocol.

Each producer writes unique payloads and records in a `Ledger` what it sent and what the
broker acknowledged (a success response, receipt, confirm, delivery report or committed
transaction read); the raw producers run until their connection dies with the broker, the
two confluent-kafka producers (`ConfluentProducer`) live in threads of their own through
every kill and restart. Each reader returns how many times each payload is stored, reading
every queue from offset 0, and counts in the ledger what no client could have sent
(corrupt records) and offsets that are not dense.

Never starts or kills the broker, never decides what a check means (crash_soak.py does).
"""

from __future__ import annotations

import asyncio
import itertools
import random
import struct
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import aio_pika
from confluent_kafka import KafkaError, KafkaException, Producer

from rocketport.common.batch import Record, build_batch, iter_records
from rocketport.common.batch.record_batch import parse_header, split_batches, verify_crc
from rocketport.protocols.kafka import codec
from rocketport.protocols.kafka.errors import ErrorCode
from rocketport.protocols.remoting.client import RemotingClient, request
from rocketport.protocols.remoting.codes import RequestCode, ResponseCode
from rocketport.protocols.remoting.headers import SendMessageRequestHeader, encode_send_message_header_v2
from rocketport.protocols.remoting.messages import decode_message_ext_records

QUEUES = 4  # partitions of the Kafka topics, queues of the remoting and STOMP topics
WINDOW = 4  # requests in flight per connection
TXN_RECORDS = 8  # records of one transaction
PRODUCE_V = 9
FETCH_V = 12
CREATE_TOPICS_V = 5
FLUSH_TIMEOUT_S = 45
_SIZE = struct.Struct(">i")
_I64 = struct.Struct(">q")


@dataclass
class Ledger:
    """What one protocol's producers sent and what the broker acknowledged, over all cycles."""

    sent: set[bytes] = field(default_factory=set)
    acked: set[bytes] = field(default_factory=set)
    lost: set[bytes] = field(default_factory=set)  # acked, then missing at some check
    duplicates: int = 0  # the most copies beyond the first seen at any check
    corrupt: int = 0  # payloads read that were never sent (or never committed), bad CRCs, torn transactions
    gaps: int = 0  # offsets missing or out of order
    read: int = 0  # payloads read at the last check
    unacked_found: int = 0  # sent, never acknowledged, but stored (allowed)
    cycles: int = 0
    fatal_errors: int = 0  # a confluent producer that died (and was replaced)
    committed: list[list[bytes]] = field(default_factory=list)  # transactions committed
    aborted: list[list[bytes]] = field(default_factory=list)  # transactions aborted


# ------------------------------------------------------------------ Kafka (raw)
def kafka_frame(api_key: int, version: int, correlation: int, body: dict[str, Any]) -> bytes:
    payload = codec.encode_request_header(api_key, version, correlation, "crash-soak") + b"".join(
        bytes(p) for p in codec.encode_request(api_key, version, body))
    return _SIZE.pack(len(payload)) + payload


async def read_frame(reader: asyncio.StreamReader) -> bytes:
    (size,) = _SIZE.unpack(await reader.readexactly(4))
    return await reader.readexactly(size)


async def kafka_call(port: int, api_key: int, version: int, body: dict[str, Any]) -> dict[str, Any]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(kafka_frame(api_key, version, 1, body))
        data = await asyncio.wait_for(read_frame(reader), 30)
        _, pos = codec.decode_response_header(api_key, version, data)
        return codec.decode_response(api_key, version, memoryview(data)[pos:])
    finally:
        writer.close()


async def create_topics(port: int, names: list[str]) -> None:
    """The topics, QUEUES each (topics are shared by every protocol)."""
    body = {"topics": [{"name": name, "num_partitions": QUEUES, "replication_factor": 1,
                        "assignments": [], "configs": []} for name in names], "timeout_ms": 10000}
    response = await kafka_call(port, 19, CREATE_TOPICS_V, body)
    for topic in response["topics"]:
        if topic["error_code"] not in (0, 36):  # 36: TOPIC_ALREADY_EXISTS
            raise RuntimeError(f"cannot create {topic['name']}: error {topic['error_code']}")


async def kafka_producer(port: int, topic: str, tag: bytes, ledger: Ledger, rng: random.Random) -> None:
    """Produce batches (acks=all) with WINDOW in flight until the connection dies."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    window = asyncio.Semaphore(WINDOW)
    pending: dict[int, list[bytes]] = {}

    async def send() -> None:
        for correlation in range(1, 1 << 30):
            await window.acquire()
            values = [tag + b"|%d|%d" % (correlation, i) for i in range(rng.randint(1, 8))]
            batch = build_batch([Record(i, 0, None, v) for i, v in enumerate(values)],
                                base_timestamp=int(time.time() * 1000))
            pending[correlation] = values
            ledger.sent.update(values)
            writer.write(kafka_frame(0, PRODUCE_V, correlation, {
                "transactional_id": None, "acks": -1, "timeout_ms": 30000, "topic_data": [
                    {"name": topic, "partition_data": [{"index": correlation % QUEUES, "records": batch}]}]}))
            await writer.drain()

    async def receive() -> None:
        while True:
            data = await read_frame(reader)
            correlation, pos = codec.decode_response_header(0, PRODUCE_V, data)
            body = codec.decode_response(0, PRODUCE_V, memoryview(data)[pos:])
            values = pending.pop(correlation)
            if body["responses"][0]["partition_responses"][0]["error_code"] == 0:
                ledger.acked.update(values)
            window.release()

    try:
        await until_either_ends(send(), receive())
    finally:
        writer.close()


async def kafka_read_all(port: int, topic: str, ledger: Ledger, *, committed: bool = False) -> Counter:
    """Every record value of every partition from offset 0, CRC-checked, offsets dense; with
    ``committed`` as a read_committed consumer sees them (up to the LSO, markers and the
    batches of aborted transactions left out, as KIP-98's consumer does)."""
    seen: Counter = Counter()
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        for partition in range(QUEUES):
            offset = 0
            aborting: set[int] = set()  # producers inside an aborted range here
            for correlation in range(1, 1 << 30):
                writer.write(kafka_frame(1, FETCH_V, correlation, {
                    "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 4 << 20, "isolation_level": int(committed),
                    "topics": [{"topic": topic, "partitions": [
                        {"partition": partition, "fetch_offset": offset, "partition_max_bytes": 4 << 20}]}]}))
                data = await asyncio.wait_for(read_frame(reader), 30)
                _, pos = codec.decode_response_header(1, FETCH_V, data)
                part = codec.decode_response(1, FETCH_V, memoryview(data)[pos:])["responses"][0]["partitions"][0]
                if part["error_code"] == ErrorCode.OFFSET_OUT_OF_RANGE:
                    ledger.gaps += 1  # a torn batch's records ran past the end the store indexed
                    break
                if part["error_code"]:
                    raise RuntimeError(f"fetch {topic}-{partition}@{offset}: error {part['error_code']}")
                records = bytes(part["records"] or b"")
                end = part["last_stable_offset"] if committed else part["high_watermark"]
                if not records or offset >= end:
                    break
                aborted = sorted((a["first_offset"], a["producer_id"]) for a in part["aborted_transactions"] or ())
                before = offset
                for start, size in split_batches(records):
                    if not verify_crc(records, start):
                        ledger.corrupt += 1
                        continue
                    header = parse_header(records[start:start + size])
                    if committed:
                        while aborted and aborted[0][0] <= header.last_offset:
                            aborting.add(aborted.pop(0)[1])
                        if header.is_control:  # a marker ends its producer's range
                            aborting.discard(header.producer_id)
                    for record in iter_records(records[start:start + size]):
                        record_offset = header.base_offset + record.offset_delta
                        if record_offset < offset:
                            continue  # a batch starting before the fetch offset
                        if record_offset != offset:
                            ledger.gaps += 1
                        offset = record_offset + 1
                        if header.is_control or (committed and header.producer_id in aborting):
                            continue
                        seen[record.value] += 1
                if offset == before:  # nothing read moved the offset on (a corrupt batch there):
                    ledger.gaps += 1  # the rest of this partition cannot be read in order
                    break
    finally:
        writer.close()
    return seen


# ------------------------------------------------------------------ Kafka (confluent-kafka)
class ConfluentProducer(threading.Thread):
    """One confluent-kafka producer (idempotent, or transactional with ``transactional``)
    producing from its own thread through every kill and restart, paced to about 2,000
    records a second. `pause` has it finish what it holds (flush; the transaction in hand
    committed or aborted) and wait, so a check reads a settled topic; `resume` goes on. A
    fatal error is counted and the producer replaced: the count is what the soak reports."""

    def __init__(self, bootstrap: str, topic: str, ledger: Ledger, *, transactional: bool) -> None:
        super().__init__(daemon=True, name=f"confluent-{topic}")
        self.topic, self.ledger, self.transactional = topic, ledger, transactional
        self.config: dict[str, Any] = {
            "bootstrap.servers": bootstrap, "linger.ms": 5, "reconnect.backoff.max.ms": 500,
            "message.timeout.ms": 60_000, "error_cb": self._on_error,
            "log_level": 2,  # its connection failures while the broker is down are expected
            **({"transactional.id": f"soak-{topic}", "transaction.timeout.ms": 60_000} if transactional
               else {"enable.idempotence": True, "acks": "all"})}
        self._pause = threading.Event()
        self._paused = threading.Event()
        self._resume = threading.Event()
        self._stopping = threading.Event()
        self._fatal = threading.Event()
        self.error: BaseException | None = None
        self._seq = itertools.count()

    def _on_error(self, err: KafkaError) -> None:
        if err.fatal():
            self._fatal.set()

    def _delivered(self, err: KafkaError | None, msg: Any) -> None:
        if err is None and not self.transactional:
            self.ledger.acked.add(msg.value())

    def pause(self) -> None:
        self._resume.clear()
        self._pause.set()
        if not self._paused.wait(FLUSH_TIMEOUT_S * 2) and self.error is None:
            raise RuntimeError(f"{self.name} did not settle")

    def resume(self) -> None:
        self._paused.clear()
        self._pause.clear()
        self._resume.set()

    def stop(self) -> None:
        self._stopping.set()
        self._resume.set()
        self.join(FLUSH_TIMEOUT_S)

    def run(self) -> None:
        try:
            while not self._stopping.is_set():
                producer = self._new_producer()
                while not (self._stopping.is_set() or self._fatal.is_set()):
                    try:
                        self._step(producer)
                    except Exception as exc:  # raised out of the client once it has died: counted below
                        if not (self._fatal.is_set() or _is_fatal(exc) or _is_fatal(exc.__cause__)):
                            raise
                        self._fatal.set()
                if self._fatal.is_set():
                    self.ledger.fatal_errors += 1
                    self._fatal.clear()
        except BaseException as exc:  # reported by the soak's loop
            self.error = exc
            self._paused.set()

    def _step(self, producer: Producer) -> None:
        if self._pause.is_set():
            self._settle(producer)
            self._paused.set()
            self._resume.wait()
        elif self.transactional:
            self._transaction(producer)
        else:
            self._produce(producer)

    def _new_producer(self) -> Producer:
        producer = Producer(self.config)
        if self.transactional:
            producer.init_transactions(FLUSH_TIMEOUT_S)
        return producer

    def _settle(self, producer: Producer) -> None:
        deadline = time.monotonic() + FLUSH_TIMEOUT_S
        while producer.flush(1) and time.monotonic() < deadline and not self._fatal.is_set():
            pass

    def _produce(self, producer: Producer) -> None:
        for _ in range(20):
            seq = next(self._seq)
            value = b"i|%d" % seq
            try:
                producer.produce(self.topic, value=value, partition=seq % QUEUES, on_delivery=self._delivered)
            except BufferError:  # its queue is full while the broker is away
                break
            self.ledger.sent.add(value)
        producer.poll(0.01)

    def _transaction(self, producer: Producer) -> None:
        txn = next(self._seq)
        values = [b"t|%d|%d" % (txn, i) for i in range(TXN_RECORDS)]
        try:
            producer.begin_transaction()
            for i, value in enumerate(values):
                self.ledger.sent.add(value)
                producer.produce(self.topic, value=value, partition=i % QUEUES)
            committed = _commit_or_abort(producer)
        except KafkaException as exc:
            if exc.args[0].fatal():  # its outcome is unknown: neither committed nor aborted in the ledger
                self._fatal.set()
            raise
        if committed:
            self.ledger.committed.append(values)
            self.ledger.acked.update(values)
        else:
            self.ledger.aborted.append(values)
        time.sleep(0.002)


def _is_fatal(exc: BaseException | None) -> bool:
    """A fatal KafkaException (confluent-kafka may raise one out of a flush, wrapped in the
    SystemError of the delivery callback it interrupted)."""
    return isinstance(exc, KafkaException) and exc.args[0].fatal()


def _commit_or_abort(producer: Producer) -> bool:
    """Commit the open transaction: True once committed, False when the client had to abort
    it. A retriable failure (the broker away) is retried, as confluent-kafka says to, for
    FLUSH_TIMEOUT_S at most: a coordinator that never settles is the soak's error, not a hang."""
    deadline = time.monotonic() + FLUSH_TIMEOUT_S
    while True:
        try:
            producer.commit_transaction(FLUSH_TIMEOUT_S)
            return True
        except KafkaException as exc:
            error: KafkaError = exc.args[0]
            if error.txn_requires_abort():
                break
            if not error.retriable() or time.monotonic() > deadline:
                raise
    while True:
        try:
            producer.abort_transaction(FLUSH_TIMEOUT_S)
            return False
        except KafkaException as exc:
            if not exc.args[0].retriable() or time.monotonic() > deadline:
                raise


# ------------------------------------------------------------------ remoting
def send_command(topic: str, body: bytes, queue_id: int) -> Any:
    header = SendMessageRequestHeader("soak", topic, "TBW102", QUEUES, queue_id, 0, int(time.time() * 1000), 0, "")
    return request(RequestCode.SEND_MESSAGE_V2, encode_send_message_header_v2(header), body)


async def remoting_producer(port: int, topic: str, tag: bytes, ledger: Ledger) -> None:
    """Sync sends, WINDOW in flight, until the connection dies."""
    client = await RemotingClient.connect(f"127.0.0.1:{port}")
    counter = iter(range(1 << 30))

    async def worker() -> None:
        for seq in counter:
            body = tag + b"|%d" % seq
            ledger.sent.add(body)
            response = await client.invoke(send_command(topic, body, seq % QUEUES), timeout_s=30)
            if response.code == ResponseCode.SUCCESS:
                ledger.acked.add(body)

    try:  # a dead connection fails every worker's next or pending invoke: all end
        results = await asyncio.gather(*(worker() for _ in range(WINDOW)), return_exceptions=True)
    finally:
        await client.close()
    for result in results:  # how it ended (a connection error, normally)
        if isinstance(result, BaseException):
            raise result


async def remoting_read_all(port: int, topic: str, queues: int, ledger: Ledger) -> Counter:
    """Every message body of every queue of ``topic`` from offset 0, offsets dense."""
    seen: Counter = Counter()
    async with await RemotingClient.connect(f"127.0.0.1:{port}") as client:
        for queue_id in range(queues):
            offset = 0
            for _ in range(1 << 30):
                response = await client.invoke(request(RequestCode.PULL_MESSAGE, {
                    "consumerGroup": "soak_check", "topic": topic,
                    "queueId": str(queue_id), "queueOffset": str(offset), "maxMsgNums": "256",
                    "sysFlag": "0", "commitOffset": "0", "suspendTimeoutMillis": "0",
                    "subscription": "*", "subVersion": "0"}), timeout_s=30)
                if response.code in (ResponseCode.PULL_NOT_FOUND, ResponseCode.PULL_OFFSET_MOVED):
                    break
                if response.code != ResponseCode.SUCCESS:
                    raise RuntimeError(f"pull {topic}-{queue_id}@{offset}: {response.code} {response.remark}")
                messages = decode_message_ext_records(response.body)
                if not messages:
                    break
                for message in messages:
                    if message.queue_offset != offset:
                        ledger.gaps += 1
                    offset = message.queue_offset + 1
                    seen[bytes(message.body)] += 1
    return seen


# ------------------------------------------------------------------ STOMP
async def _stomp_frame(reader: asyncio.StreamReader) -> tuple[bytes, dict[bytes, bytes]]:
    """The next frame's command and headers (its body is not needed here); heart-beat EOLs
    before a frame are skipped."""
    head, _, _ = (await reader.readuntil(b"\0")).lstrip(b"\r\n").partition(b"\n\n")
    command, *lines = head.split(b"\n")
    return command, dict(line.split(b":", 1) for line in lines if b":" in line)


async def stomp_producer(port: int, topic: str, tag: bytes, ledger: Ledger) -> None:
    """SENDs with a receipt header to /queue/``topic``, WINDOW in flight, until the
    connection dies; a payload is acknowledged by its RECEIPT."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"CONNECT\naccept-version:1.2\nhost:/\n\n\0")
    command, headers = await asyncio.wait_for(_stomp_frame(reader), 30)
    if command != b"CONNECTED":
        raise RuntimeError(f"STOMP CONNECT answered {command!r} {headers}")
    window = asyncio.Semaphore(WINDOW)
    pending: dict[bytes, bytes] = {}

    async def send() -> None:
        for seq in range(1 << 30):
            await window.acquire()
            body = tag + b"|%d" % seq
            receipt = b"%d" % seq
            pending[receipt] = body
            ledger.sent.add(body)
            writer.write(b"SEND\ndestination:/queue/%s\nreceipt:%s\ncontent-length:%d\n\n%s\0"
                         % (topic.encode(), receipt, len(body), body))
            await writer.drain()

    async def receive() -> None:
        while True:
            command, headers = await _stomp_frame(reader)
            if command == b"ERROR":
                raise RuntimeError(f"STOMP ERROR {headers}")
            if command == b"RECEIPT":
                ledger.acked.add(pending.pop(headers[b"receipt-id"]))
                window.release()

    try:
        await until_either_ends(send(), receive())
    finally:
        writer.close()


# ------------------------------------------------------------------ AMQP
async def amqp_producer(port: int, exchange_name: str, tag: bytes, ledger: Ledger) -> None:
    """Publishes to a fanout exchange (= topic ``exchange_name``, one queue) on a confirm
    channel, WINDOW in flight, until the connection dies; a payload is acknowledged by its
    basic.ack. Not mandatory: with no queue bound, a publish to a declared exchange is
    stored in its topic."""
    connection = await aio_pika.connect(host="127.0.0.1", port=port, login="guest", password="guest")
    try:
        channel = await connection.channel(publisher_confirms=True)
        exchange = await channel.declare_exchange(exchange_name, aio_pika.ExchangeType.FANOUT, durable=True)
        counter = iter(range(1 << 30))

        async def worker() -> None:
            for seq in counter:
                body = tag + b"|%d" % seq
                ledger.sent.add(body)
                await exchange.publish(aio_pika.Message(body), routing_key="", mandatory=False)
                ledger.acked.add(body)

        await asyncio.gather(*(worker() for _ in range(WINDOW)))
    finally:
        try:
            await asyncio.wait_for(connection.close(), 5)
        except Exception:  # the broker is gone: nothing to close politely
            pass


# ------------------------------------------------------------------ helpers
async def until_either_ends(*coros: Any) -> None:
    """Run the coroutines until one ends (a dead connection ends them all); raises what
    ended it."""
    tasks = [asyncio.ensure_future(c) for c in coros]
    try:
        done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    for task in done:
        if task.exception() is not None:
            raise task.exception()
