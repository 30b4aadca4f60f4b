"""The native client with other RocketMQ 4.x clients, both ways, on one live broker:
the PyPI rocketmq 0.4.4 (C++ client 1.x, in a subprocess) and ali-ons 3.12.0 (npm).
Body, tags, keys and user properties must arrive intact, compressed bodies included."""

from __future__ import annotations

import time

from rocketport.client import Message, Producer, PullConsumer
from tests.protocols.remoting.test_ali_ons_client import ali_ons, node  # noqa: F401 (fixture)
from tests.protocols.remoting.test_rocketmq_cpp_client import run_client
from tests.support.aio import run

LARGE = "L" * 10_000  # over 4 KiB: sent zlib-compressed by every client


async def read(namesrv: str, topic: str, count: int, timeout_s: float = 30.0) -> list:
    async with PullConsumer("NativeReader", namesrv, consume_from="first") as consumer:
        consumer.assign(await consumer.queues(topic))
        got: list = []
        deadline = time.monotonic() + timeout_s
        while len(got) < count and time.monotonic() < deadline:
            got += await consumer.poll(timeout_s=0.2)
        return got


async def send_native(namesrv: str, topic: str, n: int) -> None:
    async with Producer(namesrv, "NativePG") as producer:
        for i in range(n):
            await producer.send(Message(topic, f"native-{i}".encode(), tags="NTag",
                                        keys=[f"nk-{i}", "shared"],
                                        properties={"seq": str(i), "who": "native"}))
        await producer.send(Message(topic, LARGE.encode(), tags="NTag", keys="big",
                                    properties={"seq": "big", "who": "native"}))


def test_native_to_rocketmq_cpp(broker, tmp_path):
    run(send_native(broker.namesrv, "ToCpp", 5))
    got = run_client(tmp_path, "push", broker.namesrv, "ToCpp", "CppReader", "6", "--timeout", "60",
                     "--linger", "1", "--show-prop", "seq", "--show-prop", "who")
    by_seq = {m["props"]["seq"]: m for m in got}
    assert set(by_seq) == {"0", "1", "2", "3", "4", "big"}
    for i in range(5):
        m = by_seq[str(i)]
        assert (m["body"], m["tags"], m["keys"], m["props"]["who"]) == (
            f"native-{i}", "NTag", f"nk-{i} shared", "native")
    assert by_seq["big"]["body"] == LARGE.rstrip(".") and by_seq["big"]["keys"] == "big"


def test_rocketmq_cpp_to_native(broker, tmp_path):
    sent = run_client(tmp_path, "produce", broker.namesrv, "FromCpp", "4", "--tag", "CTag",
                      "--key-prefix", "ck-", "--body-prefix", "cpp-", "--prop", "seq={i}",
                      "--prop", "who=cpp")
    assert [r["status"] for r in sent] == [0] * 4
    run_client(tmp_path, "produce", broker.namesrv, "FromCpp", "1", "--tag", "CTag",
               "--body-prefix", "big-", "--body-size", "10000", "--prop", "who=cpp")
    got = run(read(broker.namesrv, "FromCpp", 5))
    small = sorted((m for m in got if m.body.startswith(b"cpp-")), key=lambda m: m.body)
    assert [(m.body, m.tags, m.keys, m.properties["seq"], m.properties["who"]) for m in small] == [
        (f"cpp-{i}".encode(), "CTag", [f"ck-{i}"], str(i), "cpp") for i in range(4)]
    [big] = [m for m in got if m.body.startswith(b"big-")]
    assert len(big.body) == 10_000 and big.body.startswith(b"big-0...")


def test_native_to_ali_ons(broker, ali_ons):  # noqa: F811 (the fixture)
    run(send_native(broker.namesrv, "ToJs", 5))
    got = node(ali_ons, "consume", broker.namesrv, "ToJs", "JsReader", "6")
    by_seq = {m["properties"]["seq"]: m for m in got}
    assert set(by_seq) == {"0", "1", "2", "3", "4", "big"}
    for i in range(5):
        m = by_seq[str(i)]
        assert (m["body"], m["tags"], m["properties"]["who"]) == (f"native-{i}", "NTag", "native")
        assert m["keys"] in ([f"nk-{i}", "shared"], f"nk-{i} shared")
    assert by_seq["big"]["body"] == LARGE


def test_ali_ons_to_native(broker, ali_ons):  # noqa: F811 (the fixture)
    broker.call(broker.server.broker.create_topic, "FromJs")  # ali-ons needs the route first
    sent = node(ali_ons, "produce", broker.namesrv, "FromJs", "4", "JTag", "js-")
    assert {r["status"] for r in sent} == {"SEND_OK"}
    got = run(read(broker.namesrv, "FromJs", 4))
    assert sorted((m.body, m.tags, tuple(m.keys), m.properties["seq"]) for m in got) == [
        (f"js-{i}".encode(), "JTag", (f"key-{i}",), str(i)) for i in range(4)]
