"""Property tests: the connection never raises, and encode/decode round-trips."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from rocketport.protocols.remoting import (
    CommandReceived,
    LanguageCode,
    ProtocolError,
    RemotingCommand,
    RemotingConnection,
    SerializeType,
    encode_command,
)

_text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=20)
_i32 = st.integers(-(2**31), 2**31 - 1)
_i16 = st.integers(-(2**15), 2**15 - 1)

commands = st.builds(
    RemotingCommand,
    code=_i16,
    language=st.sampled_from(list(LanguageCode)),
    version=_i16,
    opaque=_i32,
    flag=_i32,
    remark=st.none() | _text.filter(bool),
    ext_fields=st.dictionaries(_text.filter(bool), _text, max_size=5),
    body=st.binary(max_size=64),
    serialize_type=st.sampled_from(list(SerializeType)),
)


def _check_events(events: list) -> None:
    for event in events:
        assert isinstance(event, (CommandReceived, ProtocolError))
    fatal = [i for i, e in enumerate(events) if isinstance(e, ProtocolError) and e.fatal]
    assert not fatal or fatal == [len(events) - 1]


@given(st.lists(st.binary(max_size=64), max_size=8))
def test_random_bytes_never_raise(chunks: list[bytes]) -> None:
    conn = RemotingConnection(max_frame_length=4096)
    for chunk in chunks:
        _check_events(conn.receive_data(chunk))


@given(commands)
def test_round_trip(command: RemotingCommand) -> None:
    events = RemotingConnection().receive_data(b"".join(encode_command(command)))
    assert len(events) == 1 and events[0].command == command


@settings(max_examples=300)
@given(commands, st.data())
def test_mutated_valid_frames_never_raise(command: RemotingCommand, data: st.DataObject) -> None:
    raw = bytearray(b"".join(encode_command(command)))
    for _ in range(data.draw(st.integers(1, 4))):
        index = data.draw(st.integers(0, len(raw) - 1))
        raw[index] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(raw)))
    conn = RemotingConnection(max_frame_length=1 << 16)
    events = conn.receive_data(bytes(raw[:cut])) + conn.receive_data(bytes(raw[cut:]))
    _check_events(events)


@given(st.lists(commands, min_size=1, max_size=5), st.lists(st.integers(1, 50), max_size=20))
def test_any_chunking_yields_the_same_commands(cmds: list[RemotingCommand], sizes: list[int]) -> None:
    stream = b"".join(b"".join(encode_command(c)) for c in cmds)
    conn = RemotingConnection()
    events = []
    pos = 0
    for size in sizes:
        events += conn.receive_data(stream[pos : pos + size])
        pos += size
    events += conn.receive_data(stream[pos:])
    assert [e.command for e in events] == cmds
