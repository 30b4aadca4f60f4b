"""Well-formed openings of the STOMP, Web-STOMP, AMQP, HTTP and TLS front-ends: the seeds
the fuzzers mutate (tests/tls/test_fuzz_frontends.py with hypothesis, bench/fuzz.py's long
campaigns), built with real codecs (pamqp, Python's ssl) rather than typed by hand."""

from __future__ import annotations

import ssl

from pamqp import commands, frame


def client_hello() -> bytes:
    """A real ClientHello, as Python's ssl writes it for localhost."""
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    obj = ssl.create_default_context().wrap_bio(incoming, outgoing, server_hostname="localhost")
    try:
        obj.do_handshake()
    except ssl.SSLWantReadError:
        pass
    return outgoing.read()


def amqp_opening() -> bytes:
    """The protocol header, then start-ok (guest/guest) through basic.publish, as one client writes them."""
    methods = [(0, commands.Connection.StartOk(client_properties={"product": "fuzz"}, mechanism="PLAIN",
                                               response="\0guest\0guest")),
               (0, commands.Connection.TuneOk(channel_max=16, frame_max=131072, heartbeat=0)),
               (0, commands.Connection.Open(virtual_host="/")), (1, commands.Channel.Open()),
               (1, commands.Queue.Declare(queue="fz")), (1, commands.Basic.Publish(exchange="", routing_key="fz"))]
    return b"AMQP\x00\x00\x09\x01" + b"".join(frame.marshal(method, channel) for channel, method in methods)


STOMP = [b"CONNECT\naccept-version:1.2\nhost:/\nlogin:guest\npasscode:guest\n\n\x00"
         b"SEND\ndestination:/queue/fz\ncontent-length:5\n\nhello\x00"
         b"SUBSCRIBE\nid:1\ndestination:/queue/fz\nack:client\n\n\x00",
         b"STOMP\naccept-version:1.0,1.1,1.2\nheart-beat:100,100\n\n\x00"
         b"BEGIN\ntransaction:t\n\n\x00SEND\ndestination:/topic/fz\ntransaction:t\n\nx\x00COMMIT\ntransaction:t\n\n\x00"]
WEB_STOMP = [b"GET /ws HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
             b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
             b"Sec-WebSocket-Protocol: v12.stomp\r\n\r\n\x81\x85\x01\x02\x03\x04BMQWA"]
HTTP = [b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", b"GET /api/topics HTTP/1.1\r\nHost: x\r\nAccept: */*\r\n\r\n",
        b"POST /api/topics HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"]


def seeds() -> dict[str, list[bytes]]:
    """Per front-end (stomp, ws, amqp, http, tls), the openings to mutate."""
    return {"stomp": STOMP, "ws": WEB_STOMP, "amqp": [amqp_opening()], "http": HTTP, "tls": [client_hello()]}
