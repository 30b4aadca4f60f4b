"""Binding changes change where later publishes go, not what a queue already holds
(core/delivery's set_sources keep_routed), as in RabbitMQ, through pika."""

from __future__ import annotations

from tests.protocols.amqp.test_pika import _connect, _drain


def test_unbinds_and_binds_in_a_row_keep_what_each_binding_routed(amqp_port):
    with _connect(amqp_port) as conn:
        ch = conn.channel()
        ch.confirm_delivery()
        for name in ("orders", "refunds", "audits"):
            ch.exchange_declare(name, "direct")
        ch.queue_declare("ledger")
        ch.queue_bind("ledger", "orders", "eu")
        ch.queue_bind("ledger", "refunds", "eu")
        ch.basic_publish("orders", "eu", b"order-1")
        ch.basic_publish("refunds", "us", b"refund-us")  # never routed: other key
        ch.queue_unbind("ledger", "orders", "eu")  # order-1 stays in the queue
        ch.basic_publish("orders", "eu", b"order-2")  # no longer routed
        ch.queue_bind("ledger", "refunds", "us")  # refund-us, sent before, stays out
        ch.queue_bind("ledger", "audits", "eu")  # a change while order-1 is still unread
        ch.basic_publish("refunds", "us", b"refund-us-2")
        ch.basic_publish("audits", "eu", b"audit-1")
        got = sorted(body for _, _, body in _drain(ch, "ledger", 3))
        assert got == [b"audit-1", b"order-1", b"refund-us-2"]
        assert ch.basic_get("ledger")[0] is None
