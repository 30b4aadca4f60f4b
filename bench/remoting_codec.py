"""Throughput of the remoting frame codec on a typical SEND_MESSAGE_V2 frame.

Run: `python bench/remoting_codec.py`. Reports the best of several runs, for orjson.loads
alone (the floor the header parse cannot beat), header decode, whole-frame decode through
RemotingConnection (one frame per chunk and 100 per chunk) and encode.
"""

from __future__ import annotations

import timeit

import orjson

from rocketport.protocols.remoting import RemotingCommand, RemotingConnection, encode_command
from rocketport.protocols.remoting.frame import decode_json_header

EXT_FIELDS = {
    "a": "please_rename_unique_group_name", "b": "TopicTest", "c": "TBW102", "d": "4",
    "e": "3", "f": "0", "g": "1700000000000", "h": "0",
    "i": "TAGS\x01TagA\x02KEYS\x01key1\x02UNIQ_KEY\x01AC1100020001000000001234567890AB\x02WAIT\x01true\x02",
    "j": "0", "k": "false", "m": "false",
}


def main() -> None:
    command = RemotingCommand(code=310, opaque=1234, ext_fields=EXT_FIELDS, body=b"x" * 64)
    frame = b"".join(encode_command(command))
    header = memoryview(frame)[8 : 8 + (len(frame) - 8 - 64)]
    chunk = frame * 100
    connection = RemotingConnection()
    cases = [
        ("orjson.loads(header)", lambda: orjson.loads(header), 1),
        ("decode_json_header", lambda: decode_json_header(header), 1),
        ("receive_data, 1 frame/chunk", lambda: connection.receive_data(frame), 1),
        ("receive_data, 100 frames/chunk", lambda: connection.receive_data(chunk), 100),
        ("encode_command", lambda: encode_command(command), 1),
    ]
    print(f"frame: {len(frame)} bytes ({len(header)} header, 64 body)")
    for name, fn, per_call in cases:
        number = 20_000 // per_call
        best = min(timeit.repeat(fn, number=number, repeat=9)) / (number * per_call)
        print(f"{name:32s} {best * 1e6:6.2f} us/frame  {1 / best:>10,.0f} frames/s")


if __name__ == "__main__":
    main()
