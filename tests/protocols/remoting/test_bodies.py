"""JSON bodies: tolerant decoding of what clients send, standard JSON out."""

from __future__ import annotations

import json
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketport.protocols.remoting.bodies import (
    BodyError,
    BrokerData,
    ClusterInfo,
    ConsumeFromWhere,
    ConsumeType,
    GetConsumerListByGroupResponseBody,
    HeartbeatData,
    LockBatchRequestBody,
    LockBatchResponseBody,
    MessageModel,
    MessageQueue,
    QueueData,
    RegisterBrokerBody,
    TopicConfig,
    TopicRouteData,
    decode_body,
    encode_body,
)
from rocketport.protocols.remoting.lenient_json import LenientJSONError, loads_lenient

CPP_HEARTBEAT = b"""{"clientID":"10.0.0.1@123","consumerDataSet":[{"consumeFromWhere":0,
"consumeType":1,"groupName":"cg","messageModel":1,"subscriptionDataSet":[{"classFilterMode":false,
"codeSet":[0,0],"expressionType":"TAG","subString":"*","subVersion":1700000000000,"tagsSet":[],
"topic":"T"}],"unitMode":false}],"producerDataSet":[]}"""
ONS_HEARTBEAT = b"""{"clientID":"10.0.0.2@456","producerDataSet":[{"groupName":"pg"}],
"consumerDataSet":[{"groupName":"cg","consumeType":"CONSUME_PASSIVELY","messageModel":"BROADCASTING",
"consumeFromWhere":"CONSUME_FROM_FIRST_OFFSET","unitMode":false,"subscriptionDataSet":[
{"topic":"T","subString":"TagA || TagB","classFilterMode":false,"tagsSet":["TagA","TagB"],
"codeSet":[2598919,2598920],"subVersion":"1700000000001"},{"topic":"%RETRY%cg","subString":"*"}]}]}"""


def test_cpp_heartbeat_enum_ordinals_become_names() -> None:
    heartbeat = decode_body(HeartbeatData, CPP_HEARTBEAT)
    consumer = heartbeat.consumer_data_set[0]
    assert heartbeat.client_id == "10.0.0.1@123"
    assert consumer.consume_type is ConsumeType.CONSUME_PASSIVELY
    assert consumer.message_model is MessageModel.CLUSTERING
    assert consumer.consume_from_where is ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET
    assert consumer.subscription_data_set[0].code_set == [0, 0]


def test_ons_heartbeat_enum_names() -> None:
    heartbeat = decode_body(HeartbeatData, ONS_HEARTBEAT)
    consumer = heartbeat.consumer_data_set[0]
    assert heartbeat.producer_data_set[0].group_name == "pg"
    assert consumer.message_model is MessageModel.BROADCASTING
    assert consumer.consume_from_where is ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
    assert [s.topic for s in consumer.subscription_data_set] == ["T", "%RETRY%cg"]
    assert consumer.subscription_data_set[0].sub_version == 1700000000001


def test_heartbeat_encodes_enum_names_and_round_trips() -> None:
    heartbeat = decode_body(HeartbeatData, CPP_HEARTBEAT)
    encoded = json.loads(encode_body(heartbeat))
    assert encoded["consumerDataSet"][0]["consumeType"] == "CONSUME_PASSIVELY"
    assert decode_body(HeartbeatData, encode_body(heartbeat)) == heartbeat


def test_fastjson_route_with_unquoted_integer_keys() -> None:
    raw = (
        b'{"brokerDatas":[{"brokerAddrs":{0:"10.0.0.1:10911",1:"10.0.0.2:10911"},'
        b'"brokerName":"broker-a","cluster":"DefaultCluster"}],"filterServerTable":{},'
        b'"queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":4,"topicSysFlag":0,"writeQueueNums":4}]}'
    )
    route = decode_body(TopicRouteData, raw)
    assert route.broker_datas[0].broker_addrs == {0: "10.0.0.1:10911", 1: "10.0.0.2:10911"}
    assert route.queue_datas[0] == QueueData("broker-a", 4, 4, 6, 0)


def test_route_encoder_emits_standard_json() -> None:
    route = TopicRouteData(
        queue_datas=[QueueData("broker-a", 8, 8)],
        broker_datas=[BrokerData("DefaultCluster", "broker-a", {0: "127.0.0.1:10911"})],
    )
    raw = encode_body(route)
    assert json.loads(raw) == {
        "queueDatas": [{"brokerName": "broker-a", "readQueueNums": 8, "writeQueueNums": 8, "perm": 6, "topicSysFlag": 0}],
        "brokerDatas": [{"cluster": "DefaultCluster", "brokerName": "broker-a", "brokerAddrs": {"0": "127.0.0.1:10911"}}],
        "filterServerTable": {},
    }
    assert decode_body(TopicRouteData, raw) == route


def test_lock_batch_bodies() -> None:
    raw = b'{"consumerGroup":"cg","clientId":"c1","mqSet":[{"topic":"T","brokerName":"b","queueId":0},{"topic":"T","brokerName":"b","queueId":1}]}'
    request = decode_body(LockBatchRequestBody, raw)
    assert request.mq_set == [MessageQueue("T", "b", 0), MessageQueue("T", "b", 1)]
    response = json.loads(encode_body(LockBatchResponseBody(request.mq_set[:1])))
    assert response == {"lockOKMQSet": [{"topic": "T", "brokerName": "b", "queueId": 0}]}


def test_consumer_list_and_cluster_info() -> None:
    assert encode_body(GetConsumerListByGroupResponseBody(["a", "b"])) == b'{"consumerIdList":["a","b"]}'
    info = ClusterInfo(
        {"broker-a": BrokerData("c", "broker-a", {0: "h:1"})}, {"c": ["broker-a"]}
    )
    assert decode_body(ClusterInfo, encode_body(info)) == info


def test_register_broker_body() -> None:
    raw = (
        b'{"topicConfigSerializeWrapper":{"topicConfigTable":{"T":{"topicName":"T","readQueueNums":4,'
        b'"writeQueueNums":4,"perm":6,"topicFilterType":"SINGLE_TAG","topicSysFlag":0,"order":false}},'
        b'"dataVersion":{"counter":3,"timestamp":1700000000000}},"filterServerList":[]}'
    )
    body = decode_body(RegisterBrokerBody, raw)
    wrapper = body.topic_config_serialize_wrapper
    assert wrapper.topic_config_table["T"] == TopicConfig("T", 4, 4)
    assert (wrapper.data_version.counter, wrapper.data_version.timestamp) == (3, 1700000000000)


@pytest.mark.parametrize(
    "raw, path",
    [
        (b"not json", ""),
        (b"[]", ""),
        (b'{"consumerDataSet":[]}', "clientID"),
        (b'{"clientID":"c","consumerDataSet":[{"groupName":"g","consumeType":7}]}', "consumerDataSet[0].consumeType"),
        (b'{"clientID":"c","consumerDataSet":[{"groupName":"g","messageModel":"SIDEWAYS"}]}', "consumerDataSet[0].messageModel"),
        (b'{"clientID":"c","consumerDataSet":{}}', "consumerDataSet"),
    ],
)
def test_malformed_bodies_raise_body_error_with_path(raw: bytes, path: str) -> None:
    with pytest.raises(BodyError) as info:
        decode_body(HeartbeatData, raw)
    assert info.value.path == path


def test_lenient_json_leaves_strings_alone() -> None:
    assert loads_lenient(b'{a:"{b:1, c:2}", "d":[1,{e:2}]}') == {"a": "{b:1, c:2}", "d": [1, {"e": 2}]}
    assert loads_lenient('{"k\\"x":1, y : 2}') == {'k"x': 1, "y": 2}
    with pytest.raises(LenientJSONError):
        loads_lenient(b"{a:}")
    with pytest.raises(LenientJSONError):
        loads_lenient(b"\xff{")


@pytest.mark.parametrize("text", [b'{"a":' + b'"\\' * 50_000, b'{a:"' + b'\\"' * 50_000,
                                  b'"' * 3 + b'\\"' * 50_000, b'{"x":"' + b'\\' * 100_001],
                         ids=["quote-backslash", "escaped-quotes", "three-quotes", "backslashes"])
def test_lenient_json_fails_unterminated_strings_in_linear_time(text: bytes) -> None:
    """A string left open made the bare-key scan start again at every later quote: a
    100 KB body of `"\\` pairs (a heartbeat, say) took minutes (32 KB: 10 s) on the
    event loop. Now an open string runs to the end once, and the text is refused."""
    started = time.perf_counter()
    with pytest.raises(LenientJSONError):
        loads_lenient(text)
    assert time.perf_counter() - started < 1.0


def test_request_bodies_hold_a_bounded_number_of_entries() -> None:
    """Decoding costs per entry, not per byte: a 14 MB heartbeat of 200,000 consumers held
    the event loop 4 s. Request bodies past MAX_REQUEST_ENTRIES are refused before any
    entry is decoded; responses (decoded by our own tools) are not limited."""
    from rocketport.protocols.remoting import bodies

    limit = bodies.MAX_REQUEST_ENTRIES
    producers = b'{"clientID":"c","producerDataSet":[' + b",".join([b'{"groupName":"p"}'] * (limit // 2 - 1)) + b"]}"
    assert len(decode_body(HeartbeatData, producers).producer_data_set) == limit // 2 - 1  # exactly the limit
    with pytest.raises(BodyError, match="list items and object members"):
        decode_body(HeartbeatData, producers.replace(b"[", b'[{"groupName":"q"},', 1))
    queues = b'{"consumerGroup":"g","clientId":"c","mqSet":[' + b",".join([b"{}"] * (limit - 2)) + b"]}"
    with pytest.raises(BodyError, match="list items and object members"):
        decode_body(LockBatchRequestBody, queues)
    topics = b'{"topicList":[' + b",".join([b'"t"'] * (limit + 1)) + b"]}"
    assert len(decode_body(bodies.TopicList, topics).topic_list) == limit + 1


def test_lenient_json_quotes_keys_after_escapes_and_at_the_end() -> None:
    assert loads_lenient('{a:"x\\\\", b:"\\"{c:1}\\"", d:{e:[]}}') == {"a": "x\\", "b": '"{c:1}"', "d": {"e": []}}
    with pytest.raises(LenientJSONError):
        loads_lenient('{a:"open')
    with pytest.raises(LenientJSONError):
        loads_lenient('{a:"ends in a backslash\\')


@given(st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.text(max_size=10),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=5), children, max_size=4),
    max_leaves=20,
))
def test_lenient_json_agrees_with_json_on_standard_json(value: object) -> None:
    assert loads_lenient(json.dumps(value)) == value


@given(st.dictionaries(st.integers(0, 1000), st.text(max_size=8), max_size=5))
def test_lenient_json_reads_fastjson_int_keys(table: dict[int, str]) -> None:
    fastjson = "{" + ",".join(f"{k}:{json.dumps(v)}" for k, v in table.items()) + "}"
    assert loads_lenient(fastjson) == {str(k): v for k, v in table.items()}
