"""A raw AMQP client for tests that need frames no library sends: handshake by hand (pamqp
frames), then bytes."""

from __future__ import annotations

import socket
import struct

from pamqp import commands, frame

from rocketport.protocols.amqp.codec import PROTOCOL_HEADER


class RawAmqp:
    def __init__(self, port: int, *, heartbeat: int = 0, timeout: float = 10.0) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.buf = b""
        self.sock.sendall(PROTOCOL_HEADER)
        assert isinstance(self.read_frame()[1], commands.Connection.Start)
        self.send(0, commands.Connection.StartOk(client_properties={"product": "raw"},
                                                 mechanism="PLAIN", response="\0guest\0guest"))
        tune = self.read_frame()[1]
        assert isinstance(tune, commands.Connection.Tune)
        self.send(0, commands.Connection.TuneOk(tune.channel_max, tune.frame_max, heartbeat))
        self.send(0, commands.Connection.Open("/"))
        assert isinstance(self.read_frame()[1], commands.Connection.OpenOk)

    def send(self, channel: int, method) -> None:
        self.sock.sendall(frame.marshal(method, channel))

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def read_frame(self):
        """(channel, frame) of the next frame; (None, None) when the broker closed."""
        while True:
            if len(self.buf) >= 7:
                size = struct.unpack_from(">I", self.buf, 3)[0]
                if len(self.buf) >= 8 + size:
                    used, channel, value = frame.unmarshal(self.buf)
                    self.buf = self.buf[used:]
                    return channel, value
            data = self.sock.recv(65536)
            if not data:
                return None, None
            self.buf += data

    def close(self) -> None:
        self.sock.close()
