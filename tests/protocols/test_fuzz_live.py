"""Hostile input against a live broker process, bounded for the suite (bench/fuzz.py runs
the million-input version): hypothesis-generated frames for every front-end, a few thousand
corpus mutations per front-end through bench/fuzz.py itself, and afterwards the broker must
still be running and answer well-formed requests.

The broker is `python -m rocketport broker` (bench/fuzz.py's BrokerProcess), so a crash
cannot take pytest down and is seen as what it is: the process exited.
"""

from __future__ import annotations

import importlib.util
import json
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rocketport.protocols.kafka import codec
from rocketport.protocols.kafka.schema import APIS
from rocketport.protocols.remoting import (
    CommandReceived,
    LanguageCode,
    RemotingCommand,
    RemotingConnection,
    RequestCode,
    ResponseCode,
    SerializeType,
    encode_command,
)

ROOT = Path(__file__).resolve().parents[2]
FUZZ = ROOT / "bench" / "fuzz.py"


def _load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


fuzz = _load("rocketport_bench_fuzz", FUZZ)
kafka_samples = _load("rocketport_kafka_samples", ROOT / "tests" / "protocols" / "kafka" / "kafka_samples.py")

SETTINGS = settings(max_examples=200, deadline=None, derandomize=True, database=None,
                    suppress_health_check=list(HealthCheck))


@pytest.fixture(scope="module")
def broker(tmp_path_factory) -> Iterator:
    process = fuzz.BrokerProcess(str(tmp_path_factory.mktemp("fuzz-broker")))
    process.start()
    try:
        fuzz.setup_store(process)
        yield process
    finally:
        process.stop()


def shoot(port: int, data: bytes, timeout: float = 5.0) -> bytes:
    """One connection: write, half-close, read until the broker closes it (bounded)."""
    received = bytearray()
    deadline = time.monotonic() + timeout
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        try:
            sock.sendall(data)
            sock.shutdown(socket.SHUT_WR)
        except OSError:  # the broker closed first (a fatal frame): what it sent still counts
            pass
        while True:
            sock.settimeout(max(0.01, deadline - time.monotonic()))
            try:
                chunk = sock.recv(65536)
            except ConnectionResetError:
                break
            except TimeoutError:
                raise AssertionError(f"the broker kept the connection open {timeout} s after our EOF") from None
            if not chunk:
                break
            received += chunk
    return bytes(received)


def assert_healthy(broker) -> None:
    assert broker.alive, f"the broker exited (status {broker.proc.returncode})"
    for front_end in fuzz.FRONT_ENDS.values():
        front_end.probe(broker.ports[front_end.port_key], 2.0)


# ------------------------------------------------------------------ remoting frames
_EXT_KEYS = ["topic", "queueId", "consumerGroup", "queueOffset", "maxMsgNums", "sysFlag", "commitOffset",
             "suspendTimeoutMillis", "subscription", "expressionType", "offset", "group", "key", "maxNum",
             "beginTimestamp", "endTimestamp", "timestamp", "clientID", "producerGroup", "commitLogOffset",
             "commitOrRollback", "msgId", "brokerName", "brokerAddr", "clusterName", "brokerId",
             "a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l", "m"]
_numbers = st.integers(-(2**63), 2**63).map(str) | st.sampled_from(["0", "-1", "1", "2147483648", "", " 7 "])
_values = _numbers | st.text(max_size=12) | st.sampled_from(["FuzzTopic", "fuzz-group", "true", "false", "*",
                                                               "a > 1", "TagA || TagB", "TAGS\x01x\x02"])
_codes = st.sampled_from([int(code) for code in RequestCode]) | st.integers(-(2**15), 2**15 - 1)

remoting_commands = st.builds(
    RemotingCommand,
    code=_codes,
    language=st.sampled_from(list(LanguageCode)),
    version=st.integers(-(2**15), 2**15 - 1),
    opaque=st.integers(-(2**31), 2**31 - 1),
    flag=st.sampled_from([0, 0, 0, 1, 2, 3]),
    remark=st.none() | st.text(max_size=8),
    ext_fields=st.dictionaries(st.sampled_from(_EXT_KEYS) | st.text(max_size=4), _values, max_size=8),
    body=st.binary(max_size=64) | st.sampled_from([
        b'{"clientID":"c","consumerDataSet":[{"groupName":"g","subscriptionDataSet":[{"topic":"FuzzTopic"}]}]}',
        b'{"consumerGroup":"g","clientId":"c","mqSet":[{"topic":"FuzzTopic","brokerName":"b","queueId":0}]}',
        b"{}", b"[]", b"null"]),
    serialize_type=st.sampled_from(list(SerializeType)),
)


@st.composite
def remoting_streams(draw) -> bytes:
    """Whole frames of random commands, then maybe one damaged by a cut or a flipped byte."""
    frames = [b"".join(bytes(p) for p in encode_command(c)) for c in draw(st.lists(remoting_commands, min_size=1, max_size=4))]
    data = bytearray(b"".join(frames))
    if draw(st.booleans()):
        at = draw(st.integers(0, len(data) - 1))
        data[at] ^= draw(st.integers(1, 255))
    return bytes(data[:draw(st.integers(len(data) // 2, len(data)))])


@pytest.mark.parametrize("port_key", ["listenPort", "namesrv.port"])
def test_hypothesis_remoting_frames(broker, port_key) -> None:
    answered = []

    @SETTINGS
    @given(remoting_streams())
    def check(data: bytes) -> None:
        answered.append(bool(shoot(broker.ports[port_key], data)))
        assert broker.alive

    check()
    assert sum(answered) > len(answered) // 4  # most frames were read far enough to be answered
    assert_healthy(broker)


# ------------------------------------------------------------------ kafka frames
_API_VERSIONS = kafka_samples.api_versions()


@st.composite
def kafka_frames(draw) -> bytes:
    """A request of a served API and version with a value in every field, sometimes cut
    short or with a flipped byte (the length prefix is kept right, so the body is what breaks)."""
    key, version = draw(st.sampled_from(_API_VERSIONS))
    body = kafka_samples.message(draw, APIS[key].request, version, version >= (APIS[key].flexible or 99))
    try:
        payload = bytearray(codec.encode_request_header(key, version, draw(st.integers(-(2**31), 2**31 - 1)),
                                                        draw(st.none() | st.text(max_size=8)))
                            + b"".join(bytes(p) for p in codec.encode_request(key, version, body)))
    except (ValueError, TypeError, struct.error, OverflowError):
        payload = bytearray(codec.encode_request_header(key, version, 1, None))
    damage = draw(st.sampled_from(["none", "none", "cut", "flip"]))
    if damage == "cut":
        del payload[draw(st.integers(8, len(payload))):]
    elif damage == "flip":
        payload[draw(st.integers(0, len(payload) - 1))] ^= draw(st.integers(1, 255))
    return struct.pack(">i", len(payload)) + bytes(payload)


def test_hypothesis_kafka_frames(broker) -> None:
    answered = []

    @SETTINGS
    @given(st.lists(kafka_frames(), min_size=1, max_size=3))
    def check(frames: list[bytes]) -> None:
        answered.append(bool(shoot(broker.ports["kafka.port"], b"".join(frames))))
        assert broker.alive

    check()
    assert sum(answered) > len(answered) // 4  # most requests decoded and were answered
    assert_healthy(broker)


# ------------------------------------------------------------------ regressions, end to end
def test_a_send_header_with_an_array_code_is_answered_and_the_connection_kept(broker) -> None:
    """The send lane hashed a raw header's code: an array code raised out of data_received
    and the broker dropped the connection unanswered (the frame codec now refuses it)."""
    header = b'{"code":[310],"opaque":31,"flag":0,"extFields":{"b":"FuzzTopic"}}'
    bad = struct.pack(">iI", 4 + len(header), len(header)) + header
    probe = RemotingCommand(code=RequestCode.GET_BROKER_RUNTIME_INFO, opaque=32)
    data = shoot(broker.ports["listenPort"], bad + b"".join(bytes(p) for p in encode_command(probe)))
    events = RemotingConnection().receive_data(data)
    answers = {e.command.opaque: e.command.code for e in events if isinstance(e, CommandReceived)}
    assert answers == {31: ResponseCode.SYSTEM_ERROR, 32: ResponseCode.SUCCESS}


# ------------------------------------------------------------------ the bench itself, small
def test_bench_fuzz_small_run_finds_no_crash_and_no_hang(tmp_path) -> None:
    """bench/fuzz.py with a few thousand inputs per front-end (mutations, random frames):
    no crash, no hang, every input sent, and its JSON lines as documented."""
    inputs = 2500
    result = subprocess.run(
        [sys.executable, str(FUZZ), "--inputs", str(inputs), "--seed", "7", "--batch", "500",
         "--save", str(tmp_path / "findings")],
        capture_output=True, text=True, timeout=240, cwd=ROOT)
    rows = {row["case"]: row for row in map(json.loads, result.stdout.splitlines())}
    for name in ("remoting", "namesrv", "kafka"):
        assert f"inputs_{name}" in rows, result.stderr[-3000:]  # the bench stopped before its rows
        assert rows[f"inputs_{name}"]["value"] == inputs
        assert rows[f"crashes_{name}"]["value"] == 0, result.stderr[-3000:]
        assert rows[f"hangs_{name}"]["value"] == 0, result.stderr[-3000:]
        assert rows[f"rss_growth_{name}"]["unit"] == "MiB"
        assert all(rows[f"{case}_{name}"]["bench"] == "fuzz" for case in ("inputs", "crashes", "hangs"))
    assert result.returncode == 0, result.stderr[-3000:]
