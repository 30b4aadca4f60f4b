"""The JSON API under /api/ read with a plain HTTP client against a live broker that real
clients wrote to: the overview, topics, groups with their lag, connections, and messages
looked up by key, unique key, offsetMsgId and queue offset; bad parameters get 400 and
what does not exist 404."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, Producer

from tests.observe.metrics_support import (
    TIMEOUT,
    all_protocols_config,
    kafka_consume,
    metrics_url,
    remoting_produce,
    stomp_produce,
)
from tests.protocols.stomp.stomp_support import connect as stomp_connect
from tests.support.live_broker import LiveBroker, start_live_broker


@pytest.fixture(scope="module")
def live(tmp_path_factory) -> Iterator[LiveBroker]:
    broker = start_live_broker(all_protocols_config(str(tmp_path_factory.mktemp("api") / "store")))
    try:
        broker.call(lambda: broker.server.broker.create_topic("ApiT", read_queue_nums=1, write_queue_nums=1))
        producer = Producer({"bootstrap.servers": broker.bootstrap})
        for i in range(6):
            producer.produce("ApiT", b"body-%d" % i, key=b"key-%d" % i)
        producer.produce("ApiT", bytes(range(256)), key=b"binary")
        assert producer.flush(TIMEOUT) == 0
        kafka_consume(broker, "ApiT", "ApiG", 7)
        producer.produce("ApiT", b"late", key=b"late")
        assert producer.flush(TIMEOUT) == 0
        remoting_produce(broker, "ApiNative", 2)
        yield broker
    finally:
        broker.stop()


def get(live: LiveBroker, path: str) -> tuple[int, dict]:
    try:
        with urllib.request.urlopen(metrics_url(live, path), timeout=TIMEOUT) as answer:
            assert answer.headers["content-type"] == "application/json"
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_overview_names_the_broker_and_its_listeners(live):
    status, body = get(live, "/api/overview")
    assert status == 200
    assert body["brokerName"] == "broker-a" and body["brokerRole"] == "ASYNC_MASTER"
    assert {listener["frontEnd"] for listener in body["listeners"]} == {"remoting", "kafka", "amqp", "stomp", "http"}
    assert body["protocols"]["kafka"]["messagesIn"] == 8
    assert body["protocols"]["remoting"]["messagesIn"] == 2
    assert body["store"]["commitLogMaxOffset"] > 0


def test_topics_and_one_topic(live):
    status, body = get(live, "/api/topics")
    assert status == 200
    topics = {t["topic"]: t for t in body["topics"]}
    assert topics["ApiT"] == {"topic": "ApiT", "queues": 1, "messages": 8, "writtenBy": ["kafka"]}
    assert topics["ApiNative"]["writtenBy"] == ["remoting"]
    status, topic = get(live, "/api/topics/ApiT")
    assert status == 200
    assert topic["queues"][0]["minOffset"] == 0 and topic["queues"][0]["maxOffset"] == 8
    assert "ApiG" in topic["groups"]
    assert get(live, "/api/topics/NoSuchTopic")[0] == 404


def test_which_protocols_wrote_each_topic(live):
    """One topic written over Kafka, remoting and STOMP names all three; a deleted topic's
    writers are forgotten, so the same name made again starts with none."""
    producer = Producer({"bootstrap.servers": live.bootstrap})
    producer.produce("ApiShared", b"over kafka")
    assert producer.flush(TIMEOUT) == 0
    remoting_produce(live, "ApiShared", 2)
    stomp_produce(live, "/queue/ApiShared", 3)
    topic = get(live, "/api/topics/ApiShared")[1]
    assert sorted(topic["writtenBy"]) == ["kafka", "remoting", "stomp"]
    assert sum(q["maxOffset"] for q in topic["queues"]) == 6
    listed = {t["topic"]: t for t in get(live, "/api/topics")[1]["topics"]}
    assert sorted(listed["ApiShared"]["writtenBy"]) == ["kafka", "remoting", "stomp"]

    remoting_produce(live, "ApiGone", 1)
    assert get(live, "/api/topics/ApiGone")[1]["writtenBy"] == ["remoting"]
    live.call(lambda: live.server.broker.delete_topic("ApiGone"))
    assert "ApiGone" not in {t["topic"] for t in get(live, "/api/topics")[1]["topics"]}
    live.call(lambda: live.server.broker.create_topic("ApiGone"))
    assert get(live, "/api/topics/ApiGone")[1]["writtenBy"] == []


def test_groups_with_their_lag(live):
    status, body = get(live, "/api/groups")
    assert status == 200
    assert {"group": "ApiG", "lag": 1, "topics": ["ApiT"], "members": {}} in body["groups"]  # none connected
    status, group = get(live, "/api/groups/ApiG")
    assert status == 200
    assert group["lag"] == 1
    assert group["topics"]["ApiT"]["queues"] == [{"queueId": 0, "brokerOffset": 8, "consumerOffset": 7, "lag": 1}]
    assert get(live, "/api/groups/NoSuchGroup")[0] == 404


def test_connections_per_protocol(live):
    status, body = get(live, "/api/connections")
    assert status == 200
    assert set(body["protocols"]) == {"remoting", "kafka", "amqp", "stomp", "http"}
    assert body["protocols"]["http"]["total"] >= 1  # this request's
    assert any(c["address"].startswith("127.0.0.1:") for c in body["protocols"]["http"]["connections"])


def test_one_groups_members_over_three_protocols_at_once(live):
    """Group ApiMixed consumes over Kafka, STOMP and remoting at the same time: each
    connection names it, and the group lists one member per protocol."""
    from rocketport.client.sync import PullConsumer
    kafka = Consumer({"bootstrap.servers": live.bootstrap, "group.id": "ApiMixed", "auto.offset.reset": "earliest"})
    stomp, _ = stomp_connect(live)
    remoting = PullConsumer("ApiMixed", live.namesrv, consume_from="first")
    try:
        kafka.subscribe(["ApiT"])
        stomp.subscribe("/queue/ApiNative", id="1", ack="client-individual", headers={"x-group": "ApiMixed"})
        remoting.start()
        remoting.assign(remoting.queues("ApiNative"))
        remoting.poll(timeout_s=0.2, max_messages=1)
        deadline = time.monotonic() + TIMEOUT
        members: dict[str, int] = {}
        while members != {"kafka": 1, "stomp": 1, "remoting": 1} and time.monotonic() < deadline:
            kafka.poll(0.1)  # joins the group
            members = next((g["members"] for g in get(live, "/api/groups")[1]["groups"] if g["group"] == "ApiMixed"), {})
        assert members == {"kafka": 1, "stomp": 1, "remoting": 1}
        status, group = get(live, "/api/groups/ApiMixed")
        assert status == 200 and sorted(m["protocol"] for m in group["members"]) == ["kafka", "remoting", "stomp"]
        connections = get(live, "/api/connections")[1]["protocols"]
        for protocol in ("kafka", "stomp", "remoting"):
            assert any(c["consumerGroups"] == ["ApiMixed"] and c["consumes"]
                       for c in connections[protocol]["connections"]), protocol
    finally:
        kafka.close()
        stomp.disconnect()
        remoting.shutdown()


def test_message_by_key_then_by_its_ids_and_offset(live):
    status, body = get(live, "/api/messages?topic=ApiT&key=key-3")
    assert status == 200
    [message] = body["messages"]
    assert message["body"] == "body-3" and message["bodyEncoding"] == "text" and message["keys"] == "key-3"
    assert message["queueOffset"] == 3
    status, at = get(live, "/api/messages?topic=ApiT&queue=0&offset=3")
    assert status == 200 and at["messages"][0]["body"] == "body-3"
    [binary] = get(live, "/api/messages?topic=ApiT&key=binary")[1]["messages"]
    assert binary["bodyEncoding"] == "hex" and binary["body"] == bytes(range(256)).hex()


def test_message_by_unique_key_and_offset_msg_id(live):
    queue = next(q for q in get(live, "/api/topics/ApiNative")[1]["queues"] if q["maxOffset"] > 0)
    [first] = get(live, f"/api/messages?topic=ApiNative&queue={queue['queueId']}&offset=0")[1]["messages"]
    assert first["uniqueKey"] and first["body"].startswith("remoting-")
    status, body = get(live, f"/api/messages?topic=ApiNative&uniqueKey={first['uniqueKey']}")
    assert status == 200 and body["messages"][0]["body"] == first["body"]
    status, body = get(live, f"/api/messages/{first['offsetMsgId']}")
    assert status == 200 and body["messages"][0]["uniqueKey"] == first["uniqueKey"]


def post(live: LiveBroker, path: str, body: object, **headers: str) -> tuple[int, dict]:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    request = urllib.request.Request(metrics_url(live, path), data=data, method="POST",
                                     headers={"content-type": "application/json", **headers})
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as exc:
        payload = exc.read()
        return exc.code, json.loads(payload) if exc.headers["content-type"] == "application/json" else {
            "error": payload.decode()}


def test_actions_create_a_topic_send_a_message_and_reset_a_group(live):
    status, made = post(live, "/api/topics", {"topic": "ApiMade", "readQueueNums": 2, "writeQueueNums": 2})
    assert status == 200 and made == {"topic": "ApiMade", "readQueueNums": 2, "writeQueueNums": 2, "perm": 6}
    assert len(get(live, "/api/topics/ApiMade")[1]["queues"]) == 2
    status, sent = post(live, "/api/messages", {"topic": "ApiMade", "keys": "made-1", "tags": "t", "body": "héllo"})
    assert status == 200 and sent["offsetMsgId"]
    [found] = get(live, "/api/messages?topic=ApiMade&key=made-1")[1]["messages"]
    assert found["body"] == "héllo" and found["tags"] == "t" and found["queueId"] == sent["queueId"]
    status, reset = post(live, "/api/groups/ApiReset/reset", {"topic": "ApiT", "timestamp": 0})
    assert status == 200 and reset["offsets"] == {"0": 0}
    assert get(live, "/api/groups/ApiReset")[1]["lag"] == 8  # back to the topic's first message


@pytest.mark.parametrize("path, body, headers, status", [
    ("/api/topics", {"topic": "X1"}, {"content-type": "text/plain"}, 415),  # what an HTML form of another site sends
    ("/api/topics", {"topic": "X1"}, {"origin": "http://evil.example"}, 403),
    ("/api/topics", {"topic": "X1"}, {"host": "evil.example"}, 403),  # DNS rebinding
    ("/api/topics", b"{not json", {}, 400),
    ("/api/topics", ["X1"], {}, 400),
    ("/api/topics", {"topic": "bad name!"}, {}, 400),
    ("/api/topics", {"topic": "X1", "perm": 5}, {}, 400),
    ("/api/topics", {"topic": "X1", "readQueueNums": 0}, {}, 400),
    ("/api/messages", {"topic": "NoSuchTopic", "body": "x"}, {}, 404),
    ("/api/messages", {"topic": "ApiT", "body": 7}, {}, 400),
    ("/api/groups/G/reset", {"topic": "ApiT", "timestamp": "yesterday"}, {}, 400),
    ("/api/groups/G/reset", {"topic": "NoSuchTopic", "timestamp": 0}, {}, 404),
    ("/api/nothing", {}, {}, 404),
])
def test_actions_refused_say_why(live, path, body, headers, status):
    got, answer = post(live, path, body, **headers)
    assert got == status, answer
    assert answer["error"]
    assert get(live, "/api/topics/X1")[0] == 404  # nothing was made


def test_reads_for_another_host_name_are_refused(live):
    request = urllib.request.Request(metrics_url(live, "/api/overview"), headers={"host": "rebound.example:5557"})
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=TIMEOUT)
    assert refused.value.code == 403
    for host in ("localhost:1", "127.0.0.1", "[::1]:5557", "app.localhost"):
        request = urllib.request.Request(metrics_url(live, "/api/overview"), headers={"host": host})
        with urllib.request.urlopen(request, timeout=TIMEOUT) as answer:
            assert answer.status == 200


@pytest.mark.parametrize("path, status", [
    ("/api/messages", 400),
    ("/api/messages?topic=ApiT", 400),
    ("/api/messages?topic=ApiT&queue=x&offset=1", 400),
    ("/api/messages?topic=ApiT&queue=0&offset=99", 404),
    ("/api/messages?topic=ApiT&uniqueKey=nope", 404),
    ("/api/messages/0000000000000000", 404),
    ("/api/messages/not-an-id", 404),
    ("/api/nothing", 404),
])
def test_bad_requests_say_why(live, path, status):
    got, body = get(live, path)
    assert got == status, body
    assert body["error"]
