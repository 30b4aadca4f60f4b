"""A MESSAGE frame's property headers, rendered from properties as the store encodes them."""

from __future__ import annotations

from rocketport.common.message import encode_properties
from rocketport.protocols.stomp.codec import V10, V12
from rocketport.protocols.stomp.headers import PropertyHeaders


def _raw(**props: str) -> bytes:
    return encode_properties(props)


def test_store_properties_are_hidden_tags_and_keys_shown_as_x_headers():
    headers = PropertyHeaders(V12, "tag")
    raw = _raw(UNIQ_KEY="u1", color="blue", TAGS="T", KEYS="k1 k2", WAIT="true", tag="T")
    assert headers.of_stored(raw) == "color:blue\nx-tags:T\nx-keys:k1 k2\n"


def test_messages_differing_only_in_their_unique_key_render_alike_wherever_it_sits():
    headers = PropertyHeaders(V12, "tag")
    first = [_raw(UNIQ_KEY=f"u{i}", color="blue") for i in range(3)]
    middle = [_raw(color="blue", UNIQ_KEY=f"u{i}", size="7") for i in range(3)]
    last = [_raw(color="red", UNIQ_KEY=f"u{i}") for i in range(3)]
    assert {headers.of_stored(raw) for raw in first} == {"color:blue\n"}
    assert {headers.of_stored(raw) for raw in middle} == {"color:blue\nsize:7\n"}
    assert {headers.of_stored(raw) for raw in last} == {"color:red\n"}


def test_values_are_escaped_for_the_connection_version():
    raw = _raw(path="a:b\\c", note="two\nlines")
    assert PropertyHeaders(V12, "tag").of_stored(raw) == "path:a\\cb\\\\c\nnote:two\\nlines\n"
    assert PropertyHeaders(V10, "tag").of_stored(raw) == "path:a:b\\c\nnote:two lines\n"


def test_many_distinct_property_blocks_each_render_their_own():
    headers = PropertyHeaders(V12, "tag")
    for i in range(300):
        assert headers.of_stored(_raw(n=str(i))) == f"n:{i}\n"


def test_an_amqp_content_type_is_content_type_and_binary_values_go_in_base64():
    """AMQP's content_type property is STOMP's content-type; a value that is not UTF-8 (a
    Kafka header's octets, kept through surrogateescape) is written in base64 and named in
    x-base64-headers; the hidden typed table never shows."""
    raw = encode_properties({"content_type": "text/plain", "bin": b"\xff\x00".decode("utf-8", "surrogateescape"),
                             "txt": "héllo", "AMQP_HEADERS": "AAAA"})
    assert PropertyHeaders(V12, "tag").of_stored(raw) == (
        "content-type:text/plain\nbin:/wA=\ntxt:héllo\nx-base64-headers:bin\n")
