"""An AMQP 0-9-1 server that only writes pre-rendered deliveries: the drain client's ceiling.

Run: python bench/amqp_frames_server.py PORT COUNT SIZE (uvloop when installed, as the broker)
Answers the connection handshake (start, tune, open; any credentials), channel.open,
basic.qos, queue.declare and queue.purge (as empty), then on basic.consume writes COUNT
deliveries of SIZE-octet bodies: basic.deliver (the consumer's tag, delivery tags 1..COUNT,
the default exchange, routing key ``bench-q``), a content header with delivery_mode 2 (the
properties a persistent message published by the bench comes back with from Rocketport and
RabbitMQ) and one body frame, never more than the channel's prefetch count unacknowledged
(basic.ack, single or multiple). basic.cancel (pika sends it before closing), channel.close
and connection.close are answered. A drain
against it measures what the client alone can take (amqp_bench.py's
``drain_*_pika_ceiling`` rows); nothing is stored, and nothing is parsed beyond what that
needs.
"""

from __future__ import annotations

import asyncio
import struct
import sys

from pamqp import commands, frame
from pamqp.body import ContentBody
from pamqp.header import ContentHeader

_FRAME_HEAD = struct.Struct(">BHI")
_U64 = struct.Struct(">Q")


def _deliveries(count: int, size: int, channel: int, consumer_tag: str) -> list[bytes]:
    """Every delivery's three frames, as one byte string each."""
    method = frame.marshal(commands.Basic.Deliver(consumer_tag, 0, False, "", "bench-q"), channel)
    tag_at = 12 + len(consumer_tag.encode())  # frame head 7, class and method 4, tag's length 1
    head, tail = method[:tag_at], method[tag_at + 8:]
    content = (frame.marshal(ContentHeader(body_size=size, properties=commands.Basic.Properties(delivery_mode=2)),
                             channel)
               + frame.marshal(ContentBody(b"x" * size), channel))
    return [head + _U64.pack(tag) + tail + content for tag in range(1, count + 1)]


async def _serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, count: int, size: int) -> None:
    def send(channel: int, value: object) -> None:
        writer.write(frame.marshal(value, channel))

    deliveries: list[bytes] = []
    sent = acked = 0
    prefetch = 0
    buf = b""
    try:
        while chunk := await reader.read(1 << 16):
            buf += chunk
            if buf.startswith(b"AMQP"):
                if len(buf) < 8:
                    continue
                buf = buf[8:]
                send(0, commands.Connection.Start(server_properties={"product": "amqp_frames_server"},
                                                  mechanisms="PLAIN AMQPLAIN", locales="en_US"))
            while len(buf) >= 7:
                length = _FRAME_HEAD.unpack_from(buf)[2]
                if len(buf) < length + 8:
                    break
                _, channel, value = frame.unmarshal(buf[:length + 8])
                buf = buf[length + 8:]
                if isinstance(value, commands.Basic.Ack):
                    acked = value.delivery_tag if value.multiple else max(acked, value.delivery_tag)
                elif isinstance(value, commands.Connection.StartOk):
                    send(0, commands.Connection.Tune(channel_max=2047, frame_max=131072, heartbeat=0))
                elif isinstance(value, commands.Connection.Open):
                    send(0, commands.Connection.OpenOk())
                elif isinstance(value, commands.Channel.Open):
                    send(channel, commands.Channel.OpenOk())
                elif isinstance(value, commands.Basic.Qos):
                    prefetch = value.prefetch_count
                    send(channel, commands.Basic.QosOk())
                elif isinstance(value, commands.Queue.Declare):
                    send(channel, commands.Queue.DeclareOk(value.queue or "bench-q", 0, 0))
                elif isinstance(value, commands.Queue.Purge):
                    send(channel, commands.Queue.PurgeOk(0))
                elif isinstance(value, commands.Basic.Consume):
                    tag = value.consumer_tag or "ctag-1"
                    send(channel, commands.Basic.ConsumeOk(tag))
                    deliveries = _deliveries(count, size, channel, tag)
                    sent = acked = 0
                elif isinstance(value, commands.Basic.Cancel):
                    send(channel, commands.Basic.CancelOk(value.consumer_tag))
                    deliveries = deliveries[:sent]
                elif isinstance(value, commands.Channel.Close):
                    send(channel, commands.Channel.CloseOk())
                elif isinstance(value, commands.Connection.Close):
                    send(0, commands.Connection.CloseOk())
                    await writer.drain()
                    return
            upto = min(len(deliveries), acked + prefetch if prefetch else len(deliveries))
            if upto > sent:
                writer.write(b"".join(deliveries[sent:upto]))
                sent = upto
    except ConnectionError:
        pass
    finally:
        writer.close()


async def main(port: int, count: int, size: int) -> None:
    server = await asyncio.start_server(lambda r, w: _serve(r, w, count, size), "127.0.0.1", port)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    try:
        import uvloop  # the broker's loop
    except ImportError:
        asyncio.run(main(*(int(arg) for arg in sys.argv[1:4])))
    else:
        uvloop.run(main(*(int(arg) for arg in sys.argv[1:4])))
