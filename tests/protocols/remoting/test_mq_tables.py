"""MessageQueue-keyed admin bodies in fastjson's shape (object keys), both directions."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketport.protocols.remoting.lenient_json import LenientJSONError
from rocketport.protocols.remoting.mq_tables import MessageQueueKey, encode_body, encode_table, loads

Q0 = MessageQueueKey("Orders", "broker-a", 0)
Q1 = MessageQueueKey("Orders", "broker-a", 1)


def test_encoded_keys_are_inline_objects_in_fastjsons_field_order():
    body = encode_body({"topicPutTps": 0.0}, {"offsetTable": {Q0: {"maxOffset": 5, "minOffset": 0}}})
    assert body == (b'{"offsetTable":{{"brokerName":"broker-a","queueId":0,"topic":"Orders"}:'
                    b'{"maxOffset":5,"minOffset":0}},"topicPutTps":0.0}')
    assert loads(body) == {"offsetTable": {Q0: {"maxOffset": 5, "minOffset": 0}}, "topicPutTps": 0.0}


def test_a_java_shaped_body_decodes():
    # as a Java broker writes ResetOffsetBody and ConsumeStats: inline object keys,
    # whitespace, strings holding braces and colons, numeric bare keys elsewhere
    text = ('{"consumeTps":1.5, "note":"a {b}: c", "offsetTable":{'
            '{"brokerName":"broker-a","queueId":0,"topic":"Orders"}:{"brokerOffset":9,"consumerOffset":7},'
            ' {"brokerName":"broker-a","queueId":1,"topic":"Orders"} : {"brokerOffset":3,"consumerOffset":3}},'
            '"addrs":{0:"127.0.0.1:10911"}, "list":[{"a":1},{"b":[2,{"c":3}]}]}')
    got = loads(text.encode())
    assert got["offsetTable"] == {Q0: {"brokerOffset": 9, "consumerOffset": 7},
                                  Q1: {"brokerOffset": 3, "consumerOffset": 3}}
    assert got["note"] == "a {b}: c" and got["consumeTps"] == 1.5
    assert got["addrs"] == {"0": "127.0.0.1:10911"}
    assert got["list"] == [{"a": 1}, {"b": [2, {"c": 3}]}]


def test_plain_json_is_left_alone_and_garbage_is_refused():
    assert loads(b'{"a":{"b":[1,2]}}') == {"a": {"b": [1, 2]}}
    for bad in (b'{"offsetTable":{{"brokerName":"b"', b'{"a":"unterminated', b"not json"):
        with pytest.raises(LenientJSONError):
            loads(bad)


names = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)


@given(st.dictionaries(st.builds(MessageQueueKey, names, names, st.integers(0, 1024)),
                       st.integers(-2**63, 2**63 - 1), max_size=8))
def test_tables_round_trip(table):
    assert loads(encode_table(table)) == table
