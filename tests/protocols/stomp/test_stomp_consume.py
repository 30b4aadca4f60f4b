"""Consuming with stomp.py on the core's delivery engine: /queue and /topic semantics, ack
modes, NACK to retry and DLQ, redelivery after a close, durable subscriptions, selectors,
tags, transactions, flow control."""

from __future__ import annotations

import time

import pytest

from rocketport.core.metadata.subscription_groups import SubscriptionGroupConfig

from .stomp_support import RawClient, connect, endpoint, stored


def send_all(live, destination: str, bodies: list[bytes], **headers) -> None:
    conn, listener = connect(live)
    for body in bodies:
        conn.send(destination, body, headers=dict(headers))
    conn.disconnect(receipt="sent")


def bodies(messages) -> list[bytes]:
    return [body for _, body in messages]


def one_queue(live, topic: str) -> None:
    """Make ``topic`` with one queue: a subscription gets its messages in the order they were
    sent, so a message sent later is a barrier for everything before it."""
    broker = live.server.broker
    live.call(lambda: broker.create_topic_ready(topic, read_queue_nums=1, write_queue_nums=1))


def assert_only(live, listener, destination: str, expected: list[bytes]) -> None:
    """These bodies arrive and nothing else: a barrier sent after them to the same one-queue
    destination is the next thing to arrive."""
    send_all(live, destination, [b"barrier"])
    assert bodies(listener.wait_messages(len(expected) + 1)) == expected + [b"barrier"]


@pytest.mark.parametrize("version", ["1.0", "1.1", "1.2"])
def test_queue_keeps_what_was_sent_before_its_first_subscriber(stomp_broker, version):
    send_all(stomp_broker, "/queue/early", [b"a", b"b", b"c"], color="red")
    conn, listener = connect(stomp_broker, version)
    conn.subscribe("/queue/early", id="s1", ack="auto")
    got = listener.wait_messages(3)
    assert sorted(bodies(got)) == [b"a", b"b", b"c"]
    headers = got[0][0]
    assert headers["destination"] == "/queue/early" and headers["color"] == "red"
    assert headers["subscription"] == "s1" and headers["message-id"]
    conn.disconnect()


def test_queue_subscribers_compete_and_topic_subscribers_each_get_everything(stomp_broker):
    q1, l1 = connect(stomp_broker)
    q2, l2 = connect(stomp_broker)
    t1, m1 = connect(stomp_broker)
    t2, m2 = connect(stomp_broker)
    for conn in (q1, q2):
        conn.subscribe("/queue/work", id="q", ack="auto")
    for conn in (t1, t2):
        conn.subscribe("/topic/news", id="t", ack="auto", receipt="sub")
    m1.wait_receipt("sub")
    m2.wait_receipt("sub")
    send_all(stomp_broker, "/queue/work", [b"w%d" % i for i in range(40)])
    send_all(stomp_broker, "/topic/news", [b"n%d" % i for i in range(10)])
    assert l1.wait(lambda: len(l1.messages) + len(l2.messages) >= 40)
    assert sorted(bodies(l1.messages) + bodies(l2.messages)) == sorted(b"w%d" % i for i in range(40))
    assert l1.messages and l2.messages, "both queue subscribers got some"
    for listener in (m1, m2):
        assert sorted(bodies(listener.wait_messages(10))) == sorted(b"n%d" % i for i in range(10))
    for conn in (q1, q2, t1, t2):
        conn.disconnect()


def test_topic_subscription_sees_only_what_is_sent_after_it(stomp_broker):
    one_queue(stomp_broker, "late")
    send_all(stomp_broker, "/topic/late", [b"before"])
    conn, listener = connect(stomp_broker)
    conn.subscribe("/topic/late", id="t", ack="auto", receipt="sub")
    listener.wait_receipt("sub")
    send_all(stomp_broker, "/topic/late", [b"after"])
    assert_only(stomp_broker, listener, "/topic/late", [b"after"])
    conn.disconnect()


def test_client_individual_ack_and_redelivery_of_unacked_after_close(stomp_broker):
    one_queue(stomp_broker, "redo")
    send_all(stomp_broker, "/queue/redo", [b"1", b"2", b"3"])
    conn, listener = connect(stomp_broker)
    conn.subscribe("/queue/redo", id="s", ack="client-individual")
    got = listener.wait_messages(3)
    by_body = {body: headers for headers, body in got}
    conn.ack(by_body[b"2"]["ack"], receipt="acked")
    listener.wait_receipt("acked")
    conn.disconnect()
    again, listener2 = connect(stomp_broker)
    again.subscribe("/queue/redo", id="s", ack="client-individual")
    got2 = listener2.wait_messages(2)
    assert sorted(bodies(got2)) == [b"1", b"3"]
    assert all(h.get("redelivered") == "true" for h, _ in got2)
    for headers, _ in got2:
        again.ack(headers["ack"])
    again.disconnect(receipt="bye")
    third, listener3 = connect(stomp_broker)
    third.subscribe("/queue/redo", id="s", ack="client-individual")
    assert_only(stomp_broker, listener3, "/queue/redo", [])  # all acked: nothing comes back
    third.disconnect()


def test_client_ack_is_cumulative(stomp_broker):
    send_all(stomp_broker, "/queue/cumul", [b"%d" % i for i in range(5)])
    conn, listener = connect(stomp_broker, "1.1")
    conn.subscribe("/queue/cumul", id="s", ack="client", headers={"prefetch-count": "10"})
    got = listener.wait_messages(5)
    conn.ack(got[3][0]["message-id"], "s", receipt="a")  # the first four
    listener.wait_receipt("a")
    conn.disconnect()
    again, listener2 = connect(stomp_broker)
    again.subscribe("/queue/cumul", id="s", ack="auto")
    assert bodies(listener2.wait_messages(1)) == [got[4][1]]
    again.disconnect()


@pytest.mark.parametrize("where", ["NACK", "SUBSCRIBE"])
def test_nack_with_x_retry_goes_to_retry_then_dlq(stomp_broker, where):
    """RocketMQ's retry schedule on request (``x-retry: true`` on the NACK, or on SUBSCRIBE for
    every NACK of it): redelivered after the delay levels with a reconsume count, then
    dead-lettered after the group's retryMaxTimes."""
    broker = stomp_broker.server.broker
    stomp_broker.call(lambda: broker.update_group(SubscriptionGroupConfig("PoisonGroup", retry_max_times=2)))
    one_queue(stomp_broker, "poison")
    send_all(stomp_broker, "/queue/poison", [b"bad"], color="red")
    conn, listener = connect(stomp_broker)
    conn.subscribe("/queue/poison", id="s", ack="client-individual",
                   headers={"x-group": "PoisonGroup", **({"x-retry": "true"} if where == "SUBSCRIBE" else {})})
    seen = []
    deadline = time.monotonic() + 60
    while len(seen) < 3 and time.monotonic() < deadline:
        if listener.wait(lambda: len(listener.messages) > len(seen), 5):
            headers, body = listener.messages[len(seen)]
            assert body == b"bad"
            seen.append(headers)
            conn.nack(headers["ack"], receipt=f"n{len(seen)}", **({"x-retry": "true"} if where == "NACK" else {}))
            listener.wait_receipt(f"n{len(seen)}")
    assert [h.get("x-reconsume-times") for h in seen] == [None, "1", "2"]
    assert all(h["destination"] == "/queue/poison" and h["color"] == "red" for h in seen)
    [dead] = stored(stomp_broker, "%DLQ%PoisonGroup")
    assert dead.body == b"bad" and dead.properties["color"] == "red"
    send_all(stomp_broker, "/queue/poison", [b"barrier"])  # dead-lettered: the next is the barrier
    assert bodies(listener.wait_messages(4)) == [b"bad"] * 3 + [b"barrier"]
    conn.disconnect()


@pytest.mark.parametrize("requeue", [None, "true"])
def test_nack_comes_back_at_once_redelivered(stomp_broker, requeue):
    """RabbitMQ's NACK: ``requeue`` defaults to true, and the message is next in line."""
    send_all(stomp_broker, "/queue/requeue", [b"x"])
    conn, listener = connect(stomp_broker)
    conn.subscribe("/queue/requeue", id="s", ack="client-individual")
    [(headers, _)] = listener.wait_messages(1)
    assert headers["redelivered"] == "false"
    conn.nack(headers["ack"], **({} if requeue is None else {"requeue": requeue}))
    got = listener.wait_messages(2)
    assert got[1][1] == b"x" and got[1][0]["redelivered"] == "true"
    assert "x-reconsume-times" not in got[1][0]
    conn.disconnect()


def test_nack_without_requeue_dead_letters_at_once(stomp_broker):
    one_queue(stomp_broker, "refused")
    send_all(stomp_broker, "/queue/refused", [b"bad"], color="red")
    conn, listener = connect(stomp_broker)
    conn.subscribe("/queue/refused", id="s", ack="client-individual", headers={"x-group": "RefusedGroup"})
    [(headers, _)] = listener.wait_messages(1)
    conn.nack(headers["ack"], requeue="false", receipt="n")
    listener.wait_receipt("n")
    [dead] = stored(stomp_broker, "%DLQ%RefusedGroup")
    assert dead.body == b"bad" and dead.properties["color"] == "red"
    assert_only(stomp_broker, listener, "/queue/refused", [b"bad"])  # not redelivered
    conn.disconnect()


def test_nack_with_a_bad_requeue_value_is_an_error(stomp_broker):
    send_all(stomp_broker, "/queue/badrequeue", [b"x"])
    conn, listener = connect(stomp_broker)
    conn.subscribe("/queue/badrequeue", id="s", ack="client-individual")
    [(headers, _)] = listener.wait_messages(1)
    conn.nack(headers["ack"], requeue="maybe")
    assert listener.wait(lambda: listener.errors)
    assert "requeue" in listener.errors[0][0]["message"]


def test_durable_topic_subscription_resumes_after_reconnect(stomp_broker):
    conn, listener = connect(stomp_broker)
    conn.subscribe("/topic/ticks", id="d", ack="client-individual",
                   headers={"x-durable-name": "ticker"}, receipt="sub")
    listener.wait_receipt("sub")
    conn.disconnect()
    send_all(stomp_broker, "/topic/ticks", [b"while-away"])
    again, listener2 = connect(stomp_broker)
    again.subscribe("/topic/ticks", id="d", ack="auto", headers={"activemq.subscriptionName": "ticker"})
    assert bodies(listener2.wait_messages(1)) == [b"while-away"]
    again.disconnect()


def test_selector_and_tag_filter_are_evaluated_in_the_broker(stomp_broker):
    one_queue(stomp_broker, "sel")
    conn, listener = connect(stomp_broker)
    conn.subscribe("/topic/sel", id="a", ack="auto", headers={"selector": "color = 'red' AND size > 2"})
    conn.subscribe("/topic/sel", id="b", ack="auto", headers={"x-tag-filter": "TagA || TagC"},
                   receipt="subs")
    listener.wait_receipt("subs")
    producer, plistener = connect(stomp_broker)
    for i, (color, size, tag) in enumerate([("red", "3", "TagA"), ("blue", "5", "TagB"),
                                            ("red", "1", "TagC"), ("red", "9", "TagB"),
                                            ("red", "4", "TagA")]):  # the last passes both: a barrier
        producer.send("/topic/sel", b"m%d" % i, headers={"color": color, "size": size, "x-tags": tag})
    producer.disconnect(receipt="sent")
    by_sub = {}
    for headers, body in listener.wait_messages(6):
        by_sub.setdefault(headers["subscription"], []).append(body)
    assert by_sub["a"] == [b"m0", b"m3", b"m4"]
    assert by_sub["b"] == [b"m0", b"m2", b"m4"]


def test_bad_selector_gets_an_error(stomp_broker):
    raw = RawClient(endpoint(stomp_broker))
    raw.send(b"CONNECT\naccept-version:1.2\nhost:x\n\n\0")
    assert raw.frame().startswith(b"CONNECTED")
    raw.send(b"SUBSCRIBE\ndestination:/queue/s\nid:1\nselector:a = = 1\nreceipt:9\n\n\0")
    error = raw.frame()
    assert error.startswith(b"ERROR\n") and b"receipt-id:9" in error and b"selector" in error
    assert raw.closed()


def test_transaction_sends_and_acks_apply_at_commit_only(stomp_broker):
    one_queue(stomp_broker, "txq")
    send_all(stomp_broker, "/queue/txq", [b"in"])
    conn, listener = connect(stomp_broker)
    conn.subscribe("/queue/txq", id="s", ack="client-individual")
    [(headers, _)] = listener.wait_messages(1)
    tx = conn.begin()
    conn.send("/queue/txout", b"t1", transaction=tx)
    conn.send("/queue/txout", b"t2", transaction=tx)
    conn.ack(headers["ack"], transaction=tx)
    aborted = conn.begin()
    conn.send("/queue/txout", b"never", transaction=aborted)
    conn.abort(aborted, receipt="aborted")
    listener.wait_receipt("aborted")
    assert stored(stomp_broker, "txout") == []
    conn.commit(tx, receipt="committed")
    listener.wait_receipt("committed")
    assert sorted(m.body for m in stored(stomp_broker, "txout")) == [b"t1", b"t2"]
    conn.disconnect()
    again, listener2 = connect(stomp_broker)
    again.subscribe("/queue/txq", id="s", ack="auto")
    assert_only(stomp_broker, listener2, "/queue/txq", [])  # the ack committed with the transaction
    again.disconnect()


def test_prefetch_bounds_what_an_unacking_consumer_holds(stomp_broker):
    send_all(stomp_broker, "/queue/pf", [b"%d" % i for i in range(30)])
    conn, listener = connect(stomp_broker)
    conn.subscribe("/queue/pf", id="s", ack="client-individual", headers={"prefetch-count": "5"})
    listener.wait_messages(5)
    conn.ack(listener.messages[0][0]["ack"])
    listener.wait_messages(6)
    # the barrier: a second consumer takes everything left, so the first could have had more
    # than one message past each ack only by leaving the second fewer than 24
    other, others = connect(stomp_broker)
    other.subscribe("/queue/pf", id="o", ack="auto")
    assert len(others.wait_messages(24)) == 24
    assert len(listener.messages) == 6
    other.disconnect()
    conn.disconnect()


def test_unsubscribe_stops_deliveries(stomp_broker):
    conn, listener = connect(stomp_broker)
    conn.subscribe("/topic/unsub", id="t", ack="auto", receipt="sub")
    listener.wait_receipt("sub")
    conn.unsubscribe("t", receipt="unsub")
    listener.wait_receipt("unsub")
    send_all(stomp_broker, "/topic/unsub", [b"x"])
    time.sleep(0.5)
    assert listener.messages == []
    conn.disconnect()


@pytest.mark.parametrize("name,value", [("DELAY", "1"), ("x-delay", "1000"), ("TIMER_DELIVER_MS", None)])
def test_delivery_delay_through_the_core_delay_path(stomp_broker, name, value):
    headers = {name: value or str(int(time.time() * 1000) + 1000)}
    conn, listener = connect(stomp_broker)
    conn.subscribe("/queue/later", id="s", ack="auto")
    sent = time.monotonic()
    conn.send("/queue/later", b"delayed", headers=headers, receipt="r")
    listener.wait_receipt("r")
    [(got, body)] = listener.wait_messages(1)
    assert body == b"delayed" and time.monotonic() - sent >= 0.9
    assert "DELAY" not in got and "TIMER_DELIVER_MS" not in got
    conn.disconnect()


def test_exchange_routing_key_is_the_tag(stomp_broker):
    one_queue(stomp_broker, "logs")
    conn, listener = connect(stomp_broker)
    conn.subscribe("/exchange/logs/error", id="e", ack="auto")
    conn.subscribe("/exchange/logs", id="all", ack="auto", receipt="subs")
    listener.wait_receipt("subs")
    conn.send("/exchange/logs/error", b"bad")
    conn.send("/exchange/logs/info", b"fine")
    conn.send("/exchange/logs/error", b"barrier")  # both subscriptions' last
    by_sub = {}
    for headers, body in listener.wait_messages(5):
        by_sub.setdefault(headers["subscription"], []).append((headers["x-tags"], body))
    assert by_sub["e"] == [("error", b"bad"), ("error", b"barrier")]
    assert by_sub["all"] == [("error", b"bad"), ("info", b"fine"), ("error", b"barrier")]
    conn.disconnect()


@pytest.mark.parametrize("subscribed", [True, False])
def test_temp_queue_reply_to_reaches_the_requester(stomp_broker, subscribed):
    """Subscribed to the temporary queue or not (RabbitMQ subscribes a SEND's sender to the
    /temp-queue/ its reply-to names), the replies come back, on one subscription."""
    requester, replies = connect(stomp_broker)
    if subscribed:
        requester.subscribe("/temp-queue/replies", id="r", ack="auto")
    for i in range(2):
        requester.send("/queue/requests", b"ping", headers={"reply-to": "/temp-queue/replies"}, receipt=f"s{i}")
        replies.wait_receipt(f"s{i}")
    server, requests = connect(stomp_broker)
    server.subscribe("/queue/requests", id="q", ack="auto")
    for headers, body in requests.wait_messages(2):
        assert body == b"ping" and headers["reply-to"].startswith("/queue/stomp-temp-")
        server.send(headers["reply-to"], b"pong")
    got = replies.wait_messages(2)
    assert [body for _, body in got] == [b"pong", b"pong"]
    assert {h["subscription"] for h, _ in got} == {"r" if subscribed else "/temp-queue/replies"}
    server.disconnect()
    requester.disconnect()


def test_properties_named_like_message_headers_do_not_reach_the_frame(stomp_broker):
    """A RocketMQ or Kafka client may send a "content-length" or "subscription" property."""
    from rocketport.common.message import Message
    broker = stomp_broker.server.broker
    stomp_broker.call(broker.put_message(Message("clash", b"true body", {
        "content-length": "999", "subscription": "forged", "message-id": "forged", "color": "red"})))
    conn, listener = connect(stomp_broker)
    conn.subscribe("/queue/clash", id="mine", ack="client-individual")
    [(headers, body)] = listener.wait_messages(1)
    assert body == b"true body" and headers["content-length"] == "9"
    assert headers["subscription"] == "mine" and headers["message-id"] != "forged"
    assert headers["color"] == "red"
    conn.ack(headers["ack"])
    conn.disconnect()


@pytest.mark.parametrize("how", [{"activemq.subscriptionName": "gone"}, {"durable": "true"}])
def test_unsubscribe_naming_a_durable_subscription_removes_it(stomp_broker, how):
    """ActiveMQ (activemq.subscriptionName) and RabbitMQ (durable:true, named by the id):
    UNSUBSCRIBE with the name ends the durable subscription; what is sent after it is not
    kept for it, and subscribing again starts afresh."""
    sub_id = "gone" if "durable" in how else "d"
    one_queue(stomp_broker, "removed")
    conn, listener = connect(stomp_broker)
    conn.subscribe("/topic/removed", id=sub_id, ack="auto", headers=dict(how), receipt="sub")
    listener.wait_receipt("sub")
    conn.unsubscribe(id=sub_id, headers=dict(how), receipt="unsub")
    listener.wait_receipt("unsub")
    send_all(stomp_broker, "/topic/removed", [b"after-removal"])
    conn.subscribe("/topic/removed", id=sub_id, ack="auto", headers=dict(how), receipt="again")
    listener.wait_receipt("again")
    send_all(stomp_broker, "/topic/removed", [b"fresh"])
    assert_only(stomp_broker, listener, "/topic/removed", [b"fresh"])
    conn.disconnect()


def test_unsubscribe_refuses_to_remove_a_durable_subscription_in_use(stomp_broker):
    user, _ = connect(stomp_broker)
    user.subscribe("/topic/busy", id="u", ack="auto", headers={"x-durable-name": "busy"}, receipt="s")
    _.wait_receipt("s")
    raw = RawClient(endpoint(stomp_broker))
    raw.send(b"CONNECT\naccept-version:1.2\nhost:x\n\n\0")
    assert raw.frame().startswith(b"CONNECTED")
    raw.send(b"UNSUBSCRIBE\nactivemq.subscriptionName:busy\nreceipt:7\n\n\0")
    error = raw.frame()
    assert error.startswith(b"ERROR\n") and b"receipt-id:7" in error and b"in use" in error
    send_all(stomp_broker, "/topic/busy", [b"still-here"])
    assert bodies(_.wait_messages(1)) == [b"still-here"]
    user.disconnect()


def test_unsubscribe_with_a_durable_header_leaves_a_queue_and_names_unknown_ones(stomp_broker):
    """A durable header on a /queue subscription names no durable subscription: its
    UNSUBSCRIBE leaves the queue's group and offsets; an unknown name is an ERROR."""
    one_queue(stomp_broker, "kept")
    send_all(stomp_broker, "/queue/kept", [b"one", b"two"])
    conn, listener = connect(stomp_broker)
    conn.subscribe("/queue/kept", id="q", ack="client-individual",
                   headers={"durable": "true", "prefetch-count": "1"})
    [(headers, body)] = listener.wait_messages(1)
    assert body == b"one"
    conn.ack(headers["ack"])  # frees the prefetch: "two" may reach q before the UNSUBSCRIBE,
    conn.unsubscribe(id="q", headers={"durable": "true"}, receipt="u")  # which gives it back
    listener.wait_receipt("u")
    conn.subscribe("/queue/kept", id="q2", ack="auto")
    send_all(stomp_broker, "/queue/kept", [b"barrier"])  # one queue: everything before it comes first
    assert listener.wait(lambda: any(b == b"barrier" for _, b in listener.messages))
    assert [b for h, b in listener.messages if h["subscription"] == "q2"] == [b"two", b"barrier"]
    assert bodies(listener.messages).count(b"one") == 1  # the queue went on from its offset
    conn.disconnect()
    raw = RawClient(endpoint(stomp_broker))
    raw.send(b"CONNECT\naccept-version:1.2\nhost:x\n\n\0")
    assert raw.frame().startswith(b"CONNECTED")
    raw.send(b"UNSUBSCRIBE\nactivemq.subscriptionName:never-made\nreceipt:8\n\n\0")
    error = raw.frame()
    assert error.startswith(b"ERROR\n") and b"receipt-id:8" in error and b"no durable subscription" in error
