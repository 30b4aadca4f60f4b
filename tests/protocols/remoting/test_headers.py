"""Header decoding from extFields as real clients send them, and encoding back."""

from __future__ import annotations

import pytest

from rocketport.protocols.remoting.headers import (
    ConsumerSendMsgBackRequestHeader,
    EndTransactionRequestHeader,
    HeaderError,
    PullMessageRequestHeader,
    PullMessageResponseHeader,
    QueryConsumerOffsetRequestHeader,
    ResetOffsetRequestHeader,
    SendMessageRequestHeader,
    SendMessageResponseHeader,
    UnregisterClientRequestHeader,
    UpdateConsumerOffsetRequestHeader,
    decode_header,
    decode_send_message_header,
    encode_header,
    encode_send_message_header_v2,
)

V2_FROM_JAVA = {
    "a": "pg", "b": "TopicTest", "c": "TBW102", "d": "4", "e": "2", "f": "0",
    "g": "1700000000000", "h": "0", "i": "TAGS\x01TagA\x02WAIT\x01true\x02", "j": "0",
    "k": "false", "m": "false", "AccessKey": "ak", "Signature": "sig",
}
V1_FROM_CPP = {
    "producerGroup": "pg", "topic": "TopicTest", "defaultTopic": "TBW102",
    "defaultTopicQueueNums": 4, "queueId": 2, "sysFlag": 0, "bornTimestamp": 1700000000000,
    "flag": 0, "properties": "TAGS\x01TagA\x02WAIT\x01true\x02", "reconsumeTimes": 0,
    "unitMode": False, "batch": False, "OnsChannel": "ALIYUN",
}
EXPECTED_SEND = SendMessageRequestHeader(
    producer_group="pg", topic="TopicTest", default_topic="TBW102",
    default_topic_queue_nums=4, queue_id=2, sys_flag=0, born_timestamp=1700000000000, flag=0,
    properties="TAGS\x01TagA\x02WAIT\x01true\x02",
)


def test_send_v2_short_keys_and_v1_long_keys_decode_alike() -> None:
    assert decode_send_message_header(310, V2_FROM_JAVA) == EXPECTED_SEND
    assert decode_send_message_header(10, V1_FROM_CPP) == EXPECTED_SEND
    assert decode_send_message_header(320, V1_FROM_CPP) == EXPECTED_SEND


def test_send_v2_batch_flag_and_optional_fields() -> None:
    ext = dict(V2_FROM_JAVA, m="true", l="16", j="3")
    header = decode_send_message_header(310, ext)
    assert header.batch is True and header.max_reconsume_times == 16 and header.reconsume_times == 3


def test_send_v2_missing_field_names_the_short_key() -> None:
    ext = dict(V2_FROM_JAVA)
    del ext["b"]
    with pytest.raises(HeaderError) as info:
        decode_send_message_header(310, ext)
    assert info.value.field == "b"


@pytest.mark.parametrize(("short", "long"), [("e", "queueId"), ("f", "sysFlag"), ("h", "flag"),
                                            ("j", "reconsumeTimes"), ("d", "defaultTopicQueueNums")])
def test_send_fields_java_declares_integer_are_refused_outside_int32(short: str, long: str) -> None:
    """They go into 4-byte record fields: the decoder names them, the store never sees them."""
    for value in (str(2**31), str(-(2**31) - 1)):
        with pytest.raises(HeaderError) as info:
            decode_send_message_header(310, dict(V2_FROM_JAVA, **{short: value}))
        assert info.value.field == short and "int32" in info.value.reason
        with pytest.raises(HeaderError) as info:
            decode_send_message_header(10, dict(V1_FROM_CPP, **{long: value}))
        assert info.value.field == long
    edge = decode_send_message_header(310, dict(V2_FROM_JAVA, **{short: str(-(2**31))}))
    assert getattr(edge, {"e": "queue_id", "f": "sys_flag", "h": "flag", "j": "reconsume_times",
                          "d": "default_topic_queue_nums"}[short]) == -(2**31)
    big_born = decode_send_message_header(310, dict(V2_FROM_JAVA, g=str(2**40)))
    assert big_born.born_timestamp == 2**40  # a Long: int64 range


def test_send_v2_encoding_round_trips() -> None:
    ext = encode_send_message_header_v2(EXPECTED_SEND)
    assert ext["a"] == "pg" and ext["g"] == "1700000000000" and ext["k"] == "false"
    assert decode_send_message_header(310, ext) == EXPECTED_SEND


def test_pull_request_from_strings_and_numbers() -> None:
    ext = {
        "consumerGroup": "cg", "topic": "T", "queueId": "1", "queueOffset": 7,
        "maxMsgNums": "32", "sysFlag": 3, "commitOffset": "-1", "suspendTimeoutMillis": "15000",
        "subscription": "*", "subVersion": "0", "expressionType": "TAG",
    }
    header = decode_header(PullMessageRequestHeader, ext)
    assert (header.queue_offset, header.commit_offset, header.suspend_timeout_millis) == (7, -1, 15000)


def test_pull_response_encodes_all_four_offsets() -> None:
    ext = encode_header(PullMessageResponseHeader(0, 5, 0, 9))
    assert ext == {"suggestWhichBrokerId": "0", "nextBeginOffset": "5", "minOffset": "0", "maxOffset": "9"}


def test_send_response_header_keys() -> None:
    ext = encode_header(SendMessageResponseHeader("ID1,ID2", 3, 10, msg_region="DefaultRegion", trace_on="true"))
    assert ext == {
        "msgId": "ID1,ID2", "queueId": "3", "queueOffset": "10",
        "MSG_REGION": "DefaultRegion", "TRACE_ON": "true",
    }


@pytest.mark.parametrize(
    "ext, field",
    [
        ({"consumerGroup": "g", "topic": "t"}, "queueId"),
        ({"consumerGroup": "g", "topic": "t", "queueId": "x"}, "queueId"),
        ({"consumerGroup": "g", "topic": "t", "queueId": ""}, "queueId"),
        ({"consumerGroup": "g", "topic": "t", "queueId": True}, "queueId"),
        ({"consumerGroup": "g", "topic": "t", "queueId": str(2**64)}, "queueId"),
        ({"topic": "t", "queueId": "1"}, "consumerGroup"),
        ({"consumerGroup": [1], "topic": "t", "queueId": "1"}, "consumerGroup"),
    ],
)
def test_bad_or_missing_fields_raise_typed_error(ext: dict, field: str) -> None:
    with pytest.raises(HeaderError) as info:
        decode_header(QueryConsumerOffsetRequestHeader, ext)
    assert info.value.field == field and field in str(info.value)


@pytest.mark.parametrize("raw, expected", [("true", True), ("FALSE", False), ("1", True), (0, False), (True, True)])
def test_boolean_coercion(raw: object, expected: bool) -> None:
    ext = {"offset": "1", "group": "g", "delayLevel": "0", "unitMode": raw}
    assert decode_header(ConsumerSendMsgBackRequestHeader, ext).unit_mode is expected


def test_boolean_garbage_is_an_error() -> None:
    with pytest.raises(HeaderError):
        decode_header(ConsumerSendMsgBackRequestHeader, {"offset": "1", "group": "g", "delayLevel": "0", "unitMode": "maybe"})


def test_end_transaction_and_overridden_keys() -> None:
    ext = {
        "producerGroup": "pg", "tranStateTableOffset": "4", "commitLogOffset": "1024",
        "commitOrRollback": "8", "fromTransactionCheck": "false", "msgId": "ID",
    }
    header = decode_header(EndTransactionRequestHeader, ext)
    assert (header.commit_or_rollback, header.from_transaction_check) == (8, False)
    assert encode_header(UnregisterClientRequestHeader(client_id="c@1")) == {"clientID": "c@1"}
    reset = decode_header(ResetOffsetRequestHeader, {"topic": "t", "group": "g", "timestamp": "5", "isForce": "true"})
    assert reset.is_force is True and encode_header(reset)["isForce"] == "true"


def test_encode_then_decode_is_identity() -> None:
    header = UpdateConsumerOffsetRequestHeader("g", "t", 3, 2**40)
    assert decode_header(UpdateConsumerOffsetRequestHeader, encode_header(header)) == header
