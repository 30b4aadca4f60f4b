"""RocketMQ 4.x remoting protocol: sans-IO codec (frames, codes, headers, bodies).

Everything here turns bytes into typed values and back; nothing here may import asyncio,
open sockets or call into the broker. Sessions that do live beside this package.
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
