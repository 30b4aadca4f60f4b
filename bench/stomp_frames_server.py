"""A STOMP server that only writes pre-rendered MESSAGE frames: the drain client's ceiling.

Run: python bench/stomp_frames_server.py PORT COUNT SIZE
Answers CONNECT, then on SUBSCRIBE writes COUNT MESSAGE frames of SIZE-octet bodies (the
headers Rocketport writes: subscription, destination, message-id, ack, persistent,
content-length), never more than the subscription's prefetch-count unacknowledged (acks
are cumulative, as the drain's ack mode client), and answers DISCONNECT's receipt. A
drain against it measures what the client alone can take (stomp_bench.py's
``drain_*_stomppy_ceiling`` rows); nothing here is stored or parsed beyond what that needs.
"""

from __future__ import annotations

import asyncio
import re
import sys

_ACK_ID = re.compile(rb"\nid:1-(\d+)")
_RECEIPT = re.compile(rb"\nreceipt:([^\n]*)")


def _frames(count: int, size: int, subscription: bytes, destination: bytes) -> list[bytes]:
    body = b"x" * size
    head = b"MESSAGE\nsubscription:" + subscription + b"\ndestination:" + destination
    return [b"%s\nmessage-id:1-%d\nack:1-%d\npersistent:true\ncontent-length:%d\n\n%s\0"
            % (head, tag, tag, size, body) for tag in range(1, count + 1)]


async def _serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, count: int,
                 size: int) -> None:
    frames: list[bytes] = []
    sent = acked = prefetch = 0
    buf = b""
    while chunk := await reader.read(65536):
        buf += chunk
        *whole, buf = buf.split(b"\0")
        for frame in whole:
            frame = frame.lstrip(b"\r\n")
            if frame.startswith((b"CONNECT", b"STOMP")):
                writer.write(b"CONNECTED\nversion:1.2\nheart-beat:0,0\n\n\0")
            elif frame.startswith(b"SUBSCRIBE"):
                fields = dict(line.split(b":", 1) for line in frame.split(b"\n")[1:] if b":" in line)
                frames = _frames(count, size, fields.get(b"id", b"0"), fields.get(b"destination", b"/queue/x"))
                prefetch = int(fields.get(b"prefetch-count", b"1000")) or count
            elif frame.startswith(b"ACK"):
                acked = int(_ACK_ID.search(frame).group(1))
            elif frame.startswith(b"DISCONNECT"):
                receipt = _RECEIPT.search(frame)
                if receipt:
                    writer.write(b"RECEIPT\nreceipt-id:" + receipt.group(1) + b"\n\n\0")
                await writer.drain()
                writer.close()
                return
        upto = min(len(frames), acked + prefetch)
        if upto > sent:
            writer.write(b"".join(frames[sent:upto]))
            sent = upto


async def main(port: int, count: int, size: int) -> None:
    server = await asyncio.start_server(lambda r, w: _serve(r, w, count, size), "127.0.0.1", port)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main(*(int(arg) for arg in sys.argv[1:4])))
