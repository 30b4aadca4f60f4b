"""A slave's AMQP and STOMP front-ends refuse every write in their own protocol's terms and
lose nothing (real processes: name server, master, slave; pika and stomp.py on the slave).
Its vhost does not know what the master declared, so a publish it took would be confirmed
and dropped: a confirming channel gets basic.nack, a plain one channel.close 406, a
declaration 406, a STOMP SEND an ERROR frame and never a RECEIPT; reads still answer, and
the slave's sweeps leave its copies of the master's queues alone (x-expires)."""

from __future__ import annotations

import time

import pika
import pytest
import stomp
from pika.exceptions import ChannelClosedByBroker, NackError

from tests.ha.cluster import master_and_slave, wait_for
from tests.ha.test_sync_master import in_sync
from tests.protocols.stomp.stomp_support import Recorder
from tests.support.remoting import free_port

QUEUE = "declared-on-master"
EXPIRES = "expires-on-master"  # x-expires, used on the master


def _refused(call) -> ChannelClosedByBroker:
    with pytest.raises(ChannelClosedByBroker) as closed:
        call()
    assert closed.value.reply_code == 406 and "is a slave" in closed.value.reply_text, closed.value
    return closed.value


def test_a_slave_refuses_amqp_and_stomp_writes(tmp_path, namesrv):
    amqp_master, amqp_slave, stomp_slave = free_port(), free_port(), free_port()
    master, slave = master_and_slave(tmp_path, namesrv, role="ASYNC_MASTER", flush="ASYNC_FLUSH")
    master.broker.settings += (f"amqp.port={amqp_master}",)
    slave.broker.settings += (f"amqp.port={amqp_slave}", f"stomp.port={stomp_slave}")
    master.broker.start()
    slave.broker.start()
    on_master = on_slave = None
    stomp_conn = stomp.Connection([("127.0.0.1", stomp_slave)], heartbeats=(0, 0))
    try:
        wait_for(lambda: in_sync(master.addr), what="the slave in sync")
        on_master = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", amqp_master))
        master_channel = on_master.channel()
        master_channel.confirm_delivery()
        master_channel.queue_declare(QUEUE, durable=True)
        master_channel.basic_publish("", QUEUE, b"stored on the master")
        # in use on the master (a consumer), so never expired there; nor on the slave
        master_channel.queue_declare(EXPIRES, durable=True, arguments={"x-expires": 200})
        master_channel.basic_consume(EXPIRES, lambda *_: None)
        entities = slave.root / "config" / "amqpEntities.json"  # what the slave applied, durably
        wait_for(lambda: entities.exists() and EXPIRES in entities.read_text(), what="the queue on the slave")
        slave.broker.stop()  # started again: its vhost opens with the queues it applied
        slave.broker.start()
        restarted = time.monotonic()

        on_slave = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", amqp_slave))
        confirming = on_slave.channel()
        confirming.confirm_delivery()
        for exchange, mandatory in (("", False), ("", True), ("amq.direct", False)):
            with pytest.raises(NackError):  # never an ack: nothing is stored
                confirming.basic_publish(exchange, QUEUE, b"to the slave", mandatory=mandatory)
        assert confirming.is_open  # a nack, not an error: the channel goes on
        assert confirming.exchange_declare("amq.direct", passive=True)  # reads still answer

        plain = on_slave.channel()
        plain.basic_publish("", QUEUE, b"to the slave, no confirms")
        _refused(lambda: plain.exchange_declare("amq.direct", passive=True))  # the close comes first
        _refused(lambda: on_slave.channel().queue_declare("declared-on-slave"))
        _refused(lambda: on_slave.channel().exchange_declare("exchange-on-slave", "fanout"))
        _refused(lambda: on_slave.channel().queue_bind(QUEUE, "amq.fanout"))
        _refused(lambda: on_slave.channel().queue_purge(QUEUE))
        _refused(lambda: on_slave.channel().queue_delete(QUEUE))

        recorder = Recorder()
        stomp_conn.set_listener("", recorder)
        stomp_conn.connect(wait=True)
        sends = [(f"/queue/{QUEUE}", {"receipt": "r1"}), ("/queue/new-on-slave", {"receipt": "r2"}),
                 (f"/amq/queue/{QUEUE}", {}), (f"/queue/{QUEUE}", {"transaction": "t1"})]
        for n, (destination, headers) in enumerate(sends):
            if n:  # the ERROR closed the connection: a new one for the next SEND
                recorder.errors.clear()
                wait_for(lambda: recorder.disconnected, 10, "the connection closed after the ERROR")
                recorder.disconnected = False
                stomp_conn.connect(wait=True)
            if "transaction" in headers:
                stomp_conn.begin("t1")
            stomp_conn.send(destination, "to the slave", headers=headers)
            if "transaction" in headers:
                stomp_conn.commit("t1", receipt="c1")
            assert recorder.wait(lambda: recorder.errors or recorder.receipts), "no answer to the SEND"
            assert not recorder.receipts, recorder.receipts
            message = recorder.errors[0][0]["message"]
            assert message.startswith("PRECONDITION_FAILED") and "is a slave" in message, recorder.errors

        # the master holds its own message only
        assert master_channel.queue_declare(QUEUE, passive=True).method.message_count == 1
        # the x-expires sweep (once a second) left the slave's copy of the queue in use on the master
        time.sleep(max(0.0, restarted + 1.5 - time.monotonic()))
        assert on_slave.channel().queue_declare(EXPIRES, passive=True)
    finally:
        for conn in (on_master, on_slave):
            if conn is not None and conn.is_open:
                conn.close()
        if stomp_conn.is_connected():
            stomp_conn.disconnect()
        slave.broker.stop()
        master.broker.stop()
