"""Tag subscriptions: RocketMQ's `*` / `A || B` grammar, hash-code prefilter, exact check."""

from __future__ import annotations

import pytest

from rocketport.common.tags import tags_code
from rocketport.core.filter import TagFilter, compile_filter, parse_tag_expression, tag_filter_codes


@pytest.mark.parametrize("expression", [None, "", "*"])
def test_subscribe_all(expression):
    f = compile_filter("TAG", expression)
    assert isinstance(f, TagFilter) and f.subscribe_all
    assert f.expression == "*" and f.tags == frozenset() and f.codes == frozenset()
    assert f.match_tags_code(tags_code("anything")) and f.match_tags_code(0)
    assert f.match(None, {}) and f.match("TagX", {})
    assert tag_filter_codes(expression) is None


def test_tags_are_split_trimmed_and_empty_parts_dropped():
    f = compile_filter("TAG", " TagA ||TagB|| ||")
    assert f.tags == frozenset({"TagA", "TagB"})
    assert f.codes == frozenset({tags_code("TagA"), tags_code("TagB")})
    assert f.match("TagA", {}) and f.match("TagB", {})
    assert not f.match("TagC", {}) and not f.match(None, {}) and not f.match(" TagA", {})
    assert f.match_tags_code(tags_code("TagB"))
    assert not f.match_tags_code(tags_code("TagC"))
    assert tag_filter_codes("TagA || TagB") == f.codes


def test_tags_code_compares_as_java_int():
    f = compile_filter("TAG", "TagA")
    code = tags_code("TagA")
    assert f.match_tags_code(code + (1 << 32))  # RocketMQ compares tagsCode.intValue()


def test_only_separators_matches_nothing():
    f = compile_filter("TAG", "||")
    assert not f.subscribe_all and f.tags == frozenset()
    assert not f.match("TagA", {}) and not f.match_tags_code(tags_code("TagA"))


def test_star_is_only_special_alone():
    assert parse_tag_expression(" * ") == frozenset({"*"})
    assert parse_tag_expression("*||TagA") == frozenset({"*", "TagA"})
    assert not compile_filter("TAG", " * ").match("TagA", {})


def test_exact_check_resolves_hash_collisions():
    # "Aa" and "BB" share Java's String.hashCode, so the prefilter lets both through.
    assert tags_code("Aa") == tags_code("BB")
    f = compile_filter("TAG", "Aa")
    assert f.match_tags_code(tags_code("BB"))
    assert f.match("Aa", {}) and not f.match("BB", {})


@pytest.mark.parametrize("expression", ["Aa", "Aa || BB", "é || x", "\udcff || ok", "\ud800 || ok"])
def test_raw_check_agrees_with_the_decoded_tag(expression):
    """The broker's exact check compares the stored TAGS bytes undecoded: it answers as the
    check on the decoded tag does, invalid UTF-8 and surrogates included."""
    from rocketport.common.message import encode_properties

    f = compile_filter("TAG", expression)
    stored = [b"Aa", b"BB", "é".encode(), b"\xc3", b"\xff", "\ud800".encode("utf-8", "surrogatepass"),
              b"ok", b"", b"x"]
    for raw in stored:
        tag = raw.decode("utf-8", "surrogateescape")
        for props in (b"TAGS\x01" + raw + b"\x02", b"a\x01b\x02TAGS\x01" + raw, b"TAGS\x01" + raw + b"\x02k\x01v\x02"):
            assert f.raw_matcher(props) == f.match(tag, {}), (expression, props)
    assert not f.raw_matcher(encode_properties({"K": "Aa"})) and not f.raw_matcher(b"")
