"""Routing rules without a broker: topic patterns and headers matching."""

from __future__ import annotations

import pytest

from rocketport.protocols.amqp.exchanges import headers_match, topic_matches


@pytest.mark.parametrize("pattern,key,expected", [
    ("a.b.c", "a.b.c", True), ("a.*.c", "a.b.c", True), ("a.*.c", "a.c", False),
    ("#", "", True), ("#", "a.b", True), ("a.#", "a", True), ("a.#", "a.b.c", True),
    ("#.c", "c", True), ("#.c", "a.b.c", True), ("#.c", "a.b", False), ("a.#.c", "a.c", True),
    ("a.#.c", "a.x.y.c", True), ("*", "", True), ("*", "a", True), ("*.*", "a", False),
    ("a.#.#.b", "a.b", True), ("*.#", "", True), ("a.*", "a", False), ("", "", True), ("", "a", False),
])
def test_topic_patterns(pattern, key, expected):
    assert topic_matches(pattern, key) is expected


def test_headers_match_all_any_and_presence():
    props = {"format": "pdf", "type": "report"}
    assert headers_match({"format": "pdf", "type": "report"}, props)
    assert not headers_match({"format": "pdf", "type": "log"}, props)
    assert headers_match({"x-match": "any", "format": "zip", "type": "report"}, props)
    assert not headers_match({"x-match": "any", "format": "zip"}, props)
    assert headers_match({"format": None}, props)
    assert headers_match({"x-match": "all", "n": 2}, {"n": "2"})
