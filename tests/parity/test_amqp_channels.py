"""AMQP channel features against RabbitMQ 3.10: exclusive consumers and queues, auto-delete,
server-named queues, transactions, basic.recover, the headers exchange's matching, and
basic.qos with global=true, single active consumers, consumer priorities, direct reply-to."""

from __future__ import annotations

import pika
import pika.exceptions

from .amqp_client import closed, connection, drain, get, get_unacked, wait_for
from .harness import Peer


def exclusive_use(peer: Peer) -> list:
    """An exclusive consumer keeps others off its queue (403 ACCESS_REFUSED); an exclusive
    queue is its connection's only (405 RESOURCE_LOCKED to another) and goes with it."""
    queue, private = peer.name("q"), peer.name("private")
    observed = []
    with connection(peer) as owner, connection(peer) as stranger:
        channel = owner.channel()
        channel.queue_declare(queue)
        channel.basic_consume(queue, lambda *a: None, exclusive=True)
        try:
            owner.channel().basic_consume(queue, lambda *a: None)
            observed.append("second consumer taken")
        except pika.exceptions.ChannelClosedByBroker as e:
            observed.append(closed(e))
        channel.queue_declare(private, exclusive=True)
        for attempt in (lambda ch: ch.queue_declare(private, passive=True),
                        lambda ch: ch.basic_get(private),
                        lambda ch: ch.queue_declare(private, exclusive=True)):
            try:
                attempt(stranger.channel())
                observed.append("stranger let in")
            except pika.exceptions.ChannelClosedByBroker as e:
                observed.append(closed(e))
        channel.queue_delete(queue)
    with connection(peer) as later:
        try:
            later.channel().queue_declare(private, passive=True)
            observed.append("still there")
        except pika.exceptions.ChannelClosedByBroker as e:
            observed.append(closed(e))
    return observed


def test_exclusive_consumers_and_queues_keep_others_out(parity):
    assert parity.assert_same(exclusive_use) == [
        ("ChannelClosedByBroker", 403, "ACCESS_REFUSED"), ("ChannelClosedByBroker", 405, "RESOURCE_LOCKED"),
        ("ChannelClosedByBroker", 405, "RESOURCE_LOCKED"), ("ChannelClosedByBroker", 405, "RESOURCE_LOCKED"),
        ("ChannelClosedByBroker", 404, "NOT_FOUND")]


def auto_delete_and_server_named(peer: Peer) -> list:
    """An auto-delete queue goes when its last consumer cancels (not before it had one); a
    queue declared with an empty name gets a server name starting amq.gen-."""
    queue = peer.name("auto")
    with connection(peer) as conn:
        channel = conn.channel()
        channel.queue_declare(queue, auto_delete=True)
        observed = [channel.queue_declare(queue, passive=True).method.queue == queue]
        tags = [channel.basic_consume(queue, lambda *a: None) for _ in range(2)]
        channel.basic_cancel(tags[0])
        observed.append(channel.queue_declare(queue, passive=True).method.consumer_count)
        channel.basic_cancel(tags[1])
        try:
            conn.channel().queue_declare(queue, passive=True)
            observed.append("still there")
        except pika.exceptions.ChannelClosedByBroker as e:
            observed.append(closed(e))
        named = channel.queue_declare("", exclusive=True).method.queue
        observed.append(named.startswith("amq.gen-"))
        return observed


def test_auto_delete_goes_with_its_last_consumer_and_empty_names_are_generated(parity):
    assert parity.assert_same(auto_delete_and_server_named) == [
        True, 1, ("ChannelClosedByBroker", 404, "NOT_FOUND"), True]


def transactions(peer: Peer) -> list:
    """tx.select: publishes and acks take effect at tx.commit; tx.rollback drops the
    publishes and leaves the acked deliveries unacknowledged (redelivered on recover)."""
    queue = peer.name()
    with connection(peer) as conn:
        channel = conn.channel()
        channel.queue_declare(queue)
        channel.tx_select()
        channel.basic_publish("", queue, b"committed")
        observed = [drain(conn.channel(), queue)]
        channel.tx_commit()
        observed.append(get(channel, queue) is not None)
        channel.basic_publish("", queue, b"rolled back")
        channel.tx_rollback()
        channel.basic_publish("", queue, b"kept")
        channel.tx_commit()
        method, _, body = get_unacked(channel, queue)
        channel.basic_ack(method.delivery_tag)
        channel.tx_rollback()  # the ack goes; the delivery is unacknowledged again
        channel.basic_recover(requeue=True)
        again = get_unacked(channel, queue)
        channel.basic_ack(again[0].delivery_tag)
        channel.tx_commit()
        observed += [body, again[2], again[0].redelivered, drain(channel, queue)]
        channel.queue_delete(queue)
        return observed


def test_transactions_commit_and_roll_back_publishes_and_acks(parity):
    assert parity.assert_same(transactions) == [[], True, b"kept", b"kept", True, []]


def recover(peer: Peer) -> list:
    """basic.recover(requeue=true) gives back every unacknowledged delivery of the channel,
    marked redelivered."""
    queue = peer.name()
    with connection(peer) as conn:
        channel = conn.channel()
        channel.confirm_delivery()
        channel.queue_declare(queue)
        for i in range(2):
            channel.basic_publish("", queue, b"m%d" % i)
        first = [get_unacked(channel, queue)[2] for _ in range(2)]
        channel.basic_recover(requeue=True)
        again = []
        for _ in range(2):
            method, _, body = get_unacked(channel, queue)
            again.append((body, method.redelivered))
            channel.basic_ack(method.delivery_tag)
        channel.queue_delete(queue)
        return [first, sorted(again)]


def test_recover_redelivers_the_channels_unacked(parity):
    assert parity.assert_same(recover) == [[b"m0", b"m1"], [(b"m0", True), (b"m1", True)]]


def headers_matching(peer: Peer) -> list:
    """The headers exchange: x-match all / any over the binding's arguments, values compared
    with their types (RabbitMQ: the string "1" does not match the integer 1); an argument
    starting with x- is not compared."""
    exchange, all_queue, any_queue = peer.name("hx"), peer.name("all"), peer.name("any")
    with connection(peer) as conn:
        channel = conn.channel()
        channel.confirm_delivery()
        channel.exchange_declare(exchange, "headers")
        channel.queue_declare(all_queue)
        channel.queue_declare(any_queue)
        channel.queue_bind(all_queue, exchange, arguments={"x-match": "all", "n": 1, "kind": "a"})
        channel.queue_bind(any_queue, exchange, arguments={"x-match": "any", "n": 1, "flag": True})
        for name, headers in [("both", {"n": 1, "kind": "a"}), ("text-one", {"n": "1", "kind": "a"}),
                              ("kind-only", {"kind": "a"}), ("flag", {"flag": True}),
                              ("flag-text", {"flag": "true"}), ("none", None)]:
            channel.basic_publish(exchange, "", name.encode(), pika.BasicProperties(headers=headers))
        observed = [drain(channel, all_queue), drain(channel, any_queue)]
        channel.queue_delete(all_queue)
        channel.queue_delete(any_queue)
        channel.exchange_delete(exchange)
        return observed


def test_a_headers_exchange_matches_values_as_text_here_as_documented(parity):
    """docs/protocol-amqp.md's mapping: a headers binding compares its arguments with the
    message's properties as text (protocols/amqp/exchanges.py headers_match), because the
    binding is the queue's filter over the stored properties every protocol shares: a STOMP
    or Kafka header "1" must match it too. So "1" matches 1 and "true" matches true here,
    where RabbitMQ compares types."""
    rabbit, rocket = parity.observe(headers_matching)
    assert rabbit == [[b"both"], [b"both", b"flag"]]
    assert rocket == [[b"both", b"text-one"], [b"both", b"text-one", b"flag", b"flag-text"]]


def global_qos(peer: Peer) -> list:
    """basic.qos(global=true) on RabbitMQ 3.10's classic queues: one prefetch window shared
    by every consumer of the channel."""
    queues = [peer.name("a"), peer.name("b")]
    with connection(peer) as conn:
        channel = conn.channel()
        channel.confirm_delivery()
        for queue in queues:
            channel.queue_declare(queue)
            for i in range(3):
                channel.basic_publish("", queue, b"m%d" % i)
        channel.basic_qos(prefetch_count=2, global_qos=True)
        delivered: list = []
        for queue in queues:
            channel.basic_consume(queue, lambda _ch, method, _p, body: delivered.append(body))
        wait_for(conn, lambda: len(delivered) >= 2)
        channel.queue_declare(queues[0], passive=True)  # a round trip: later deliveries are in
        conn.process_data_events(time_limit=0.2)
        observed = [len(delivered)]
        for queue in queues:
            channel.queue_delete(queue)
        return observed


def test_global_qos_is_per_consumer_here_as_documented(parity):
    """docs/protocol-amqp.md 'What differs': global=true is applied per consumer, like
    global=false, so each of the two consumers gets 2 where RabbitMQ's channel gets 2."""
    rabbit, rocket = parity.observe(global_qos)
    assert rabbit == [2]
    assert rocket == [4]


def single_active_consumer(peer: Peer) -> list:
    """x-single-active-consumer: RabbitMQ delivers to one consumer of the queue (the first)
    while it lasts; when it cancels, the next one takes over."""
    queue = peer.name()
    with connection(peer) as conn:
        channel = conn.channel()
        channel.confirm_delivery()
        channel.queue_declare(queue, arguments={"x-single-active-consumer": True})
        got: dict[str, list] = {"first": [], "second": []}

        def consumer(name: str):
            def on_message(ch, method, _properties, body) -> None:
                got[name].append(body)
                ch.basic_ack(method.delivery_tag)
            return on_message
        first = channel.basic_consume(queue, consumer("first"))
        channel.basic_consume(queue, consumer("second"))
        for i in range(4):
            channel.basic_publish("", queue, b"m%d" % i)
        wait_for(conn, lambda: len(got["first"]) + len(got["second"]) >= 4)
        channel.basic_cancel(first)
        for i in range(4, 6):
            channel.basic_publish("", queue, b"m%d" % i)
        wait_for(conn, lambda: len(got["first"]) + len(got["second"]) >= 6)
        channel.queue_delete(queue)
        return [got]


def test_a_single_active_consumer_gets_everything_until_it_goes(parity):
    assert parity.assert_same(single_active_consumer) == [
        {"first": [b"m0", b"m1", b"m2", b"m3"], "second": [b"m4", b"m5"]}]


def direct_reply_to(peer: Peer) -> list:
    """Direct reply-to: a client consuming (no-ack) from the pseudo-queue
    amq.rabbitmq.reply-to publishes requests with that reply_to; the server gives the
    request a reply_to of its own (amq.rabbitmq.reply-to.<token>) and a reply published
    to it reaches the requester's consumer (Spring's RabbitTemplate uses it by default)."""
    requests = peer.name()
    with connection(peer) as conn:
        channel = conn.channel()
        channel.queue_declare(requests)
        replies: list = []
        try:
            channel.basic_consume("amq.rabbitmq.reply-to", lambda _c, _m, _p, body: replies.append(body),
                                  auto_ack=True)
        except pika.exceptions.ChannelClosedByBroker as e:
            return [("consume refused", closed(e))]
        channel.basic_publish("", requests, b"request", pika.BasicProperties(reply_to="amq.rabbitmq.reply-to"))
        server = conn.channel()
        got = get(server, requests)
        assert got is not None
        reply_to = got[1].reply_to
        server.basic_publish("", reply_to, b"reply")
        wait_for(conn, lambda: replies)
        channel.queue_delete(requests)
        return [reply_to.startswith("amq.rabbitmq.reply-to."), replies]


def test_direct_reply_to_answers_reach_the_requester(parity):
    assert parity.assert_same(direct_reply_to) == [True, [b"reply"]]


def consumer_priorities(peer: Peer) -> list:
    """Consumer priorities (basic.consume argument x-priority): RabbitMQ delivers to the
    highest-priority consumer while it has room in its prefetch window, before any other."""
    queue = peer.name()
    with connection(peer) as conn:
        channel = conn.channel()
        channel.confirm_delivery()
        channel.queue_declare(queue)
        got: dict[str, list] = {"low": [], "high": []}

        def consumer(name: str):
            def on_message(ch, method, _properties, body) -> None:
                got[name].append(body)
                ch.basic_ack(method.delivery_tag)
            return on_message
        channel.basic_consume(queue, consumer("low"))
        channel.basic_consume(queue, consumer("high"), arguments={"x-priority": 10})
        for i in range(4):
            channel.basic_publish("", queue, b"m%d" % i)
        wait_for(conn, lambda: len(got["low"]) + len(got["high"]) >= 4)
        channel.queue_delete(queue)
        return [got]


def test_the_highest_priority_consumer_is_served_first(parity):
    assert parity.assert_same(consumer_priorities) == [{"low": [], "high": [b"m0", b"m1", b"m2", b"m3"]}]


def direct_reply_to_refusals(peer: Peer) -> list:
    """What RabbitMQ refuses around direct reply-to, each a channel error (406) that leaves
    the connection open: consuming with acks, a second reply consumer on a channel,
    publishing with reply_to amq.rabbitmq.reply-to without consuming from it; and what it
    answers a declare of the pseudo-queue (declare-ok, 0 and 0) or of an unknown reply name
    (404)."""
    observed: list = []
    with connection(peer) as conn:
        attempts = [
            ("ack", lambda ch: ch.basic_consume("amq.rabbitmq.reply-to", lambda *_: None, auto_ack=False)),
            ("twice", lambda ch: [ch.basic_consume("amq.rabbitmq.reply-to", lambda *_: None, auto_ack=True)
                                  for _ in range(2)]),
            ("no consumer", lambda ch: ch.basic_publish("", "amq.rabbitmq.reply-to", b"q", pika.BasicProperties(
                reply_to="amq.rabbitmq.reply-to"))),
            ("declare", lambda ch: ch.queue_declare("amq.rabbitmq.reply-to", passive=True).method),
            ("declare unknown", lambda ch: ch.queue_declare("amq.rabbitmq.reply-to.bm90aGluZw==", passive=True)),
            ("create unknown", lambda ch: ch.queue_declare("amq.rabbitmq.reply-to.bm90aGluZw==")),
        ]
        for what, attempt in attempts:
            channel = conn.channel()
            try:
                result = attempt(channel)
                channel.basic_qos(prefetch_count=1)  # a round trip: a refused publish has closed it by now
                if what == "declare":
                    result = (result.queue, result.message_count, result.consumer_count)
                observed.append((what, "ok", result if what == "declare" else None))
            except pika.exceptions.ChannelClosedByBroker as e:
                observed.append((what, e.args[0], e.args[1], conn.is_open))
    return observed


def test_direct_reply_to_refusals_match(parity):
    assert parity.assert_same(direct_reply_to_refusals)[0] == (
        "ack", 406, "PRECONDITION_FAILED - reply consumer cannot acknowledge", True)


def direct_reply_to_mandatory(peer: Peer) -> list:
    """A mandatory reply through direct reply-to: RabbitMQ delivers it and also returns it
    (312 NO_ROUTE: no queue took it); a reply after the requester's channel closed is
    dropped, and returned when mandatory."""
    requests = peer.name()
    observed: list = []
    with connection(peer) as conn:
        channel = conn.channel()
        channel.queue_declare(requests)
        replies: list = []
        channel.basic_consume("amq.rabbitmq.reply-to", lambda _c, method, _p, body: replies.append(
            (body, method.delivery_tag, method.exchange, method.redelivered)), auto_ack=True)
        channel.basic_publish("", requests, b"request", pika.BasicProperties(reply_to="amq.rabbitmq.reply-to"))
        server = conn.channel()
        server.confirm_delivery()
        got = get(server, requests)
        assert got is not None
        reply_to = got[1].reply_to
        returned: list = []
        server.add_on_return_callback(lambda _c, method, _p, body: returned.append((method.reply_code, body)))
        for what, body in (("reply", b"reply"), ("late", b"late")):
            try:
                server.basic_publish("", reply_to, body, mandatory=True)
                observed.append((what, "published"))
            except pika.exceptions.UnroutableError as e:
                observed.append((what, "unroutable", len(e.messages)))
            if what == "reply":
                wait_for(conn, lambda: replies)
                channel.close()
        wait_for(conn, lambda: len(returned) >= 2)
        server.queue_delete(requests)
    return observed + [replies, returned]


def test_a_mandatory_direct_reply_is_delivered_and_returned(parity):
    assert parity.assert_same(direct_reply_to_mandatory) == [
        ("reply", "unroutable", 1), ("late", "unroutable", 1), [(b"reply", 1, "", False)],
        [(312, b"reply"), (312, b"late")]]
