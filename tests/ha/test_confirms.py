"""AMQP confirms and STOMP receipts under SYNC_MASTER, real processes and real clients: with
the slave in sync a confirm is an ack and a receipt a RECEIPT; with the slave gone (SIGKILL)
the publish is nacked (pika raises NackError) and the SEND is answered with an ERROR frame,
the message stored on the master all the same."""

from __future__ import annotations

import socket

import pika
import pytest

from tests.ha.cluster import master_and_slave, wait_for
from tests.ha.test_sync_master import in_sync, runtime
from tests.support.remoting import free_port


def stomp_send(port: int, body: bytes) -> bytes:
    """CONNECT, one SEND asking for a receipt; the frames the broker answers until it closes
    or the receipt comes."""
    with socket.create_connection(("127.0.0.1", port), timeout=20) as sock:
        sock.sendall(b"CONNECT\naccept-version:1.2\nhost:/\n\n\x00")
        sock.sendall(b"SEND\ndestination:/queue/ha-stomp\nreceipt:r1\ncontent-length:%d\n\n%s\x00"
                     % (len(body), body))
        got = b""
        while b"receipt-id:r1" not in got and b"ERROR" not in got:
            data = sock.recv(65536)
            if not data:
                break
            got += data
        return got


def test_confirms_and_receipts_wait_for_the_slave(tmp_path, namesrv):
    amqp, stomp = free_port(), free_port()
    master, slave = master_and_slave(tmp_path, namesrv, flush="ASYNC_FLUSH")
    master.broker.settings += (f"amqp.port={amqp}", f"stomp.port={stomp}")
    master.broker.start()
    slave.broker.start()
    try:
        wait_for(lambda: in_sync(master.addr), what="the slave in sync")
        connection = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", amqp))
        channel = connection.channel()
        channel.confirm_delivery()
        channel.queue_declare("ha-amqp")
        channel.basic_publish("", "ha-amqp", b"with the slave")  # raises on a nack
        assert b"RECEIPT" in stomp_send(stomp, b"with the slave")
        stored = int(runtime(master.addr)["commitLogMaxOffset"])
        slave.broker.kill()
        wait_for(lambda: not in_sync(master.addr), what="the master to see the slave gone")
        with pytest.raises(pika.exceptions.NackError):
            channel.basic_publish("", "ha-amqp", b"without the slave")
        answer = stomp_send(stomp, b"without the slave")
        assert b"ERROR\nmessage:" in answer and b"no slave in sync" in answer, answer
        assert int(runtime(master.addr)["commitLogMaxOffset"]) > stored  # both stored on the master
        connection.close()
    finally:
        slave.broker.stop()
        master.broker.stop()
