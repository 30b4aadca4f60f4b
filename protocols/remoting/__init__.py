"""RocketMQ 4.x remoting protocol: sans-IO codec (frames, codes, headers, bodies).

The codec modules (frame, connection, command, codes, headers, bodies, messages,
records, errors) turn bytes into typed values and back; they never import asyncio, open
sockets or call into the broker. The I/O side lives beside them, in its own modules:
`session` (connections and listeners), `handlers` (broker requests to Broker-facade calls),
`namesrv` (the name server: its route registry and requests), `client` (Rocketport as a
client) and `frontend` (assembly).
"""

from .codes import LanguageCode, RequestCode, ResponseCode, SerializeType
from .command import (
    FLAG_ONEWAY,
    FLAG_RESPONSE,
    Body,
    Buffer,
    RemotingCommand,
    body_length,
    make_response,
)
from .connection import Event, RemotingConnection
from .events import CommandReceived, ProtocolError
from .frame import DEFAULT_MAX_FRAME_LENGTH, FrameError, encode_command

__all__ = [
    "DEFAULT_MAX_FRAME_LENGTH",
    "FLAG_ONEWAY",
    "FLAG_RESPONSE",
    "Body",
    "Buffer",
    "CommandReceived",
    "Event",
    "FrameError",
    "LanguageCode",
    "ProtocolError",
    "RemotingCommand",
    "RemotingConnection",
    "RequestCode",
    "ResponseCode",
    "SerializeType",
    "body_length",
    "encode_command",
    "make_response",
]
