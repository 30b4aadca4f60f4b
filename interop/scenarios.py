"""The scenarios, written once against the adapter interface (`base.Client`).

Each is ``fn(ctx)``: it returns on success, raises `Failed` (or any error) for a failing
cell and `NotApplicable` where the client or protocol lacks the feature. `SCENARIOS` keeps
their order, per-scenario timeout (the worker's parent enforces it) and whether the fast
subset runs them.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from .base import Client, Consume, Credentials, Endpoints, Failed, In, NotApplicable, Out
from .broker import ACL_DENIED_TOPIC, ACL_GROUP, ACL_SECRET, ACL_TOPIC, ACL_USER
from .probe import Probe


@dataclass(slots=True)
class Ctx:
    """What a scenario runs with: the client class, both brokers, names unique to the run."""

    cls: type[Client]
    ep: Endpoints
    acl_ep: Endpoints | None
    run: str
    scenario: str
    probe: Probe

    def client(self, creds: Credentials | None = None, acl: bool = False) -> Client:
        ep = self.acl_ep if acl else self.ep
        if ep is None:
            raise NotApplicable("no ACL broker in this run")
        return self.cls(ep, creds)

    def topic(self, suffix: str = "") -> str:
        """A new topic for this scenario, created with 4 queues unless the client makes its own."""
        topic = self.name(suffix)
        if self.cls.precreate:
            self.probe.create_topic(topic)
        return topic

    def name(self, suffix: str = "") -> str:
        """A topic or group name of this client, scenario and run (legal in every protocol)."""
        slug = "".join(ch if ch.isalnum() else "_" for ch in self.cls.name)
        return f"i_{slug}_{self.scenario}_{self.run}{suffix}"


def body(i: int, tag: str = "") -> bytes:
    """Text bodies with non-ASCII bytes and no NUL (the C++ client's API reads C strings)."""
    return f"interop body {tag}{i} \u00e9\u2713".encode()


def check_fields(sent: Out, got: In, producer: type[Client], consumer: type[Client],
                 sent_at: tuple[float, float] | None = None) -> None:
    """DESIGN.md section 3, field by field, for the fields both sides' protocols carry."""
    if got.body != sent.body:
        raise Failed(f"body {got.body[:40]!r} != {sent.body[:40]!r}")
    both = set(producer.fields) & set(consumer.fields)
    if "key" in both and sent.key is not None and got.key != sent.key:
        raise Failed(f"key {got.key!r} != {sent.key!r}")
    if "tag" in both and sent.tag is not None and got.tag != sent.tag:
        raise Failed(f"tag {got.tag!r} != {sent.tag!r}")
    if "props" in both:
        wrong = {k: got.props.get(k) for k, v in sent.props.items() if got.props.get(k) != v}
        if wrong:
            raise Failed(f"properties {wrong} != {({k: sent.props[k] for k in wrong})}")
    if "timestamp" in consumer.fields and sent_at is not None:
        if got.timestamp_ms is None:
            raise Failed("no timestamp delivered")
        low, high = sent_at
        if not low * 1000 - 2000 <= got.timestamp_ms <= high * 1000 + 2000:
            raise Failed(f"timestamp {got.timestamp_ms} outside the send window {low:.3f}..{high:.3f}")


def _bodies(got: list[In]) -> set[bytes]:
    return {m.body for m in got}


def _need(cls: type[Client], scenario: str) -> None:
    if scenario in cls.lacks:
        raise NotApplicable(cls.lacks[scenario])


def round_trip(ctx: Ctx) -> None:
    c = ctx.client()
    topic, group = ctx.topic(), ctx.name("_g")
    c.prepare(topic, group, Consume())
    msgs = [Out(body(i), key=f"key-{i}", tag="TagA", props={"color": "red", "seq": str(i)})
            for i in range(3)]
    start = time.time()
    c.produce(topic, msgs)
    sent_at = (start, time.time())
    got = c.consume(topic, group, Consume(n=3, timeout=40))
    by_body = {m.body: m for m in got}
    for m in msgs:
        if m.body not in by_body:
            raise Failed(f"{len(got)} of 3 received")
        check_fields(m, by_body[m.body], ctx.cls, ctx.cls, sent_at)


def group_resume(ctx: Ctx) -> None:
    """A consumer takes what was sent and stops; a new one in the group takes only what came
    after (a few repeats are at-least-once; all of them again means the offsets were lost)."""
    topic, group = ctx.topic(), ctx.name("_g")
    resume(ctx.client(), ctx.client(), topic, group)


def resume(first: Client, second: Client, topic: str, group: str) -> None:
    first.prepare(topic, group, Consume())
    before = [Out(body(i, "before")) for i in range(5)]
    after = [Out(body(i, "after")) for i in range(5)]
    first.produce(topic, before)
    got = first.consume(topic, group, Consume(n=5, timeout=40))
    if _bodies(got) != {m.body for m in before}:
        raise Failed(f"first consumer got {len(_bodies(got))} of 5")
    first.produce(topic, after)
    later = second.consume(topic, group, Consume(timeout=40, idle=4))
    missing = {m.body for m in after} - _bodies(later)
    if missing:
        raise Failed(f"the next consumer missed {len(missing)} of the 5 sent after the first stopped")
    if {m.body for m in before} <= _bodies(later):
        raise Failed("the next consumer started over: the group's offsets were not kept")


def two_consumers(ctx: Ctx) -> None:
    topic, group = ctx.topic(), ctx.name("_g")
    ctx.client().prepare(topic, group, Consume())
    results: list[list[In]] = [[], []]
    errors: list[BaseException] = []
    ready = [threading.Event(), threading.Event()]

    def run(i: int) -> None:
        try:
            results[i] = ctx.client().consume(topic, group, Consume(timeout=90, idle=10, ready=ready[i]))
        except BaseException as exc:  # reported below
            errors.append(exc)
            ready[i].set()

    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(2)]
    for t in threads:
        t.start()
    for ev in ready:
        ev.wait(40)
    time.sleep(6)  # the group settles with both members (Kafka rebalances, RocketMQ reassigns)
    msgs = [Out(body(i), key=f"k{i}") for i in range(40)]
    ctx.client().produce(topic, msgs)
    for t in threads:
        t.join(90)
    if errors:
        raise errors[0]
    missing = {m.body for m in msgs} - _bodies(results[0]) - _bodies(results[1])
    if missing:
        raise Failed(f"{len(missing)} of 40 never delivered")
    counts = [len(_bodies(r)) for r in results]
    if min(counts) == 0:
        raise Failed(f"one consumer did all the work ({counts[0]} / {counts[1]})")


def tag_filter(ctx: Ctx) -> None:
    _need(ctx.cls, "tag_filter")
    c = ctx.client()
    topic, group = ctx.topic(), ctx.name("_g")
    spec = Consume(timeout=40, idle=4, tag_filter="TagA || TagB")
    c.prepare(topic, group, spec)
    msgs = [Out(body(i, tag), tag=tag) for i, tag in enumerate(["TagA", "TagB", "TagC"] * 3)]
    c.produce(topic, msgs)
    got = _bodies(c.consume(topic, group, spec))
    want = {m.body for m in msgs if m.tag != "TagC"}
    if got != want:
        raise Failed(f"got {len(got & want)} of {len(want)} wanted and {len(got - want)} unwanted")


def sql92(ctx: Ctx) -> None:
    _need(ctx.cls, "sql92")
    c = ctx.client()
    topic, group = ctx.topic(), ctx.name("_g")
    spec = Consume(timeout=40, idle=4, sql="color = 'red' AND n > 3")
    c.prepare(topic, group, spec)
    msgs = [Out(body(i), tag="T", props={"color": "red" if i % 2 else "blue", "n": str(i)})
            for i in range(10)]
    c.produce(topic, msgs)
    got = _bodies(c.consume(topic, group, spec))
    want = {m.body for i, m in enumerate(msgs) if i % 2 and i > 3}
    if got != want:
        raise Failed(f"got {len(got & want)} of {len(want)} wanted and {len(got - want)} unwanted")


def delayed(ctx: Ctx) -> None:
    _need(ctx.cls, "delayed")
    c = ctx.client()
    topic, group = ctx.topic(), ctx.name("_g")
    c.prepare(topic, group, Consume())
    sent = time.time()
    c.produce(topic, [Out(body(0), delay_s=3)])
    got = c.consume(topic, group, Consume(n=1, timeout=40))
    if not got:
        raise Failed("the delayed message never came")
    late = got[0].received_at - sent
    if not 2.5 <= late <= 20:
        raise Failed(f"delivered {late:.1f} s after the send, 3 s asked")


def retry_dlq(ctx: Ctx) -> None:
    _need(ctx.cls, "retry_dlq")
    c = ctx.client()
    topic, group = ctx.topic(), ctx.name("_g")
    ctx.probe.create_group(group, retry_max_times=2)
    stop = threading.Event()
    spec = Consume(timeout=90, nack=True, stop=stop)
    c.prepare(topic, group, spec)
    c.produce(topic, [Out(body(0), key="dlq-0", tag="TagD")])
    deliveries: list[In] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            deliveries.extend(c.consume(topic, group, spec))
        except BaseException as exc:
            errors.append(exc)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    dead = ctx.probe.wait_dlq(group, "dlq-0" if "key" in ctx.cls.fields else None, timeout=80)
    stop.set()
    t.join(60)
    if errors:
        raise errors[0]
    if not deliveries:
        raise Failed("never delivered")
    if dead is None:
        raise Failed(f"not in %DLQ%{group} after {len(deliveries)} deliveries")
    if dead and dead[0].body != body(0):
        raise Failed(f"%DLQ% holds {dead[0].body!r}")


def ordered(ctx: Ctx) -> None:
    _need(ctx.cls, "ordered")
    c = ctx.client()
    topic, group = ctx.topic(), ctx.name("_g")
    c.prepare(topic, group, Consume(orderly=True))
    msgs = [Out(f"{k}:{i}".encode(), key=f"order-{k}", tag="T") for i in range(10) for k in range(3)]
    c.produce(topic, msgs, ordered=True)
    got = c.consume(topic, group, Consume(n=30, timeout=40, orderly=True))
    seen: dict[str, list[int]] = {}
    for m in got:
        k, _, i = m.body.decode().partition(":")
        if int(i) not in seen.setdefault(k, []):
            seen[k].append(int(i))
    if sum(len(v) for v in seen.values()) < 30:
        raise Failed(f"{sum(len(v) for v in seen.values())} of 30 received")
    for k, order in seen.items():
        if order != sorted(order):
            raise Failed(f"key {k} out of order: {order}")


def transactions(ctx: Ctx) -> None:
    _need(ctx.cls, "transactions")
    c = ctx.client()
    topic, group = ctx.topic(), ctx.name("_g")
    c.prepare(topic, group, Consume())
    commit = [Out(body(i, "commit"), key=f"c{i}", tag="T") for i in range(3)]
    abort = [Out(body(i, "abort"), key=f"a{i}", tag="T") for i in range(3)]
    c.transaction(topic, commit, abort)
    got = _bodies(c.consume(topic, group, Consume(timeout=40, idle=4)))
    want = {m.body for m in commit}
    if got != want:
        raise Failed(f"{len(got & want)} of 3 committed and {len(got - want)} aborted seen")


def compression(ctx: Ctx) -> None:
    _need(ctx.cls, "compression")
    problems = []
    for codec in ctx.cls.codecs:
        c = ctx.client()
        topic, group = ctx.topic(f"_{codec}"), ctx.name(f"_{codec}_g")
        c.prepare(topic, group, Consume())
        msgs = [Out(body(i) * 2000, key=f"z{i}") for i in range(5)]  # ~40 KB, compressible
        try:
            c.produce(topic, msgs, compression=codec)
            got = _bodies(c.consume(topic, group, Consume(n=5, timeout=30)))
            if got != {m.body for m in msgs}:
                problems.append(f"{codec}: {len(got)} of 5 intact")
        except NotApplicable:
            raise
        except Exception as exc:
            problems.append(f"{codec}: {_reason(exc)}")
    if problems:
        raise Failed("; ".join(problems))


def large(ctx: Ctx) -> None:
    c = ctx.client()
    topic, group = ctx.topic(), ctx.name("_g")
    c.prepare(topic, group, Consume())
    big = (b"%08d" % int(time.time()) + bytes(range(33, 127)) * 11155)[:1 << 20]
    c.produce(topic, [Out(big, key="big", tag="T")])
    got = c.consume(topic, group, Consume(n=1, timeout=60))
    if not got:
        raise Failed("1 MiB message not delivered")
    if got[0].body != big:
        raise Failed(f"body of {len(got[0].body)} bytes differs")


def burst(ctx: Ctx) -> None:
    c = ctx.client()
    topic, group = ctx.topic(), ctx.name("_g")
    c.prepare(topic, group, Consume())
    msgs = [Out(b"burst-%d" % i, tag="T") for i in range(10_000)]
    c.produce(topic, msgs)
    got = _bodies(c.consume(topic, group, Consume(n=10_000, timeout=150, idle=15)))
    missing = len({m.body for m in msgs} - got)
    if missing:
        raise Failed(f"{missing} of 10000 lost")


def acl(ctx: Ctx) -> None:
    _need(ctx.cls, "acl")
    good = ctx.client(Credentials(ACL_USER, ACL_SECRET), acl=True)
    group = ACL_GROUP  # every client's: the account's permissions name it
    good.prepare(ACL_TOPIC, group, Consume())
    msg = Out(body(0, ctx.cls.name), key="acl", tag="T")
    good.produce(ACL_TOPIC, [msg])
    got = good.consume(ACL_TOPIC, group, Consume(timeout=40, idle=3))
    if msg.body not in _bodies(got):
        raise Failed("accepted account: message not delivered")
    for label, client, topic in (
            ("wrong secret", ctx.client(Credentials(ACL_USER, "wrong-secret"), acl=True), ACL_TOPIC),
            ("topic without PUB", good, ACL_DENIED_TOPIC)):
        try:
            client.produce(topic, [Out(b"refused?")])
        except NotApplicable:
            raise
        except Exception:
            continue
        raise Failed(f"{label}: the send was accepted")


def _reason(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text[:200]


@dataclass(slots=True, frozen=True)
class Scenario:
    name: str
    fn: Callable[[Ctx], None]
    timeout: float
    fast: bool
    title: str


SCENARIOS = [
    Scenario("round_trip", round_trip, 90, True, "round trip: body, key, tags, properties"),
    Scenario("group_resume", group_resume, 120, True, "group resumes after consumer restart"),
    Scenario("two_consumers", two_consumers, 150, False, "two consumers split a group's work"),
    Scenario("tag_filter", tag_filter, 90, True, "tag filter"),
    Scenario("sql92", sql92, 90, False, "SQL92 filter / selector"),
    Scenario("delayed", delayed, 90, False, "delayed message"),
    Scenario("retry_dlq", retry_dlq, 180, False, "retry then DLQ"),
    Scenario("ordered", ordered, 90, False, "ordered per key"),
    Scenario("transactions", transactions, 120, False, "transactions"),
    Scenario("compression", compression, 150, False, "compression"),
    Scenario("large", large, 120, True, "1 MiB message"),
    Scenario("burst", burst, 300, False, "10,000-message burst, no loss"),
    Scenario("acl", acl, 150, False, "ACL accepted and refused"),
]
BY_NAME = {s.name: s for s in SCENARIOS}


def cross(producer: type[Client], consumer: type[Client], ep: Endpoints, probe: Probe,
          run: str) -> None:
    """One cross-protocol pair: two messages from `producer`'s protocol, checked field by field
    as `consumer`'s protocol shows them."""
    p, c = producer(ep), consumer(ep)
    topic = f"x_{producer.protocol}_to_{consumer.protocol}_{run}"
    group = topic + "_g"
    if producer.precreate and consumer.precreate:
        probe.create_topic(topic)
    c.prepare(topic, group, Consume())
    msgs = [Out(body(i, producer.protocol), key=f"xkey-{i}", tag="TagX",
                props={"color": "green", "seq": str(i)}) for i in range(2)]
    start = time.time()
    p.produce(topic, msgs)
    sent_at = (start, time.time())
    got = c.consume(topic, group, Consume(n=2, timeout=40))
    by_body = {m.body: m for m in got}
    for m in msgs:
        if m.body not in by_body:
            raise Failed(f"{len(got)} of 2 received")
        check_fields(m, by_body[m.body], producer, consumer, sent_at)


# protocols whose consumer groups are the core's groups by name, committing offsets there
SHARED_GROUPS = ("remoting", "kafka", "stomp")


def shared_group(first: type[Client], second: type[Client], ep: Endpoints, probe: Probe,
                 run: str) -> None:
    """DESIGN.md section 3: "a group name is one group for every protocol that consumes with
    it". `first` consumes and stops; `second`, another protocol, resumes in the same group."""
    topic = f"g_{first.protocol}_to_{second.protocol}_{run}"
    probe.create_topic(topic)
    resume(first(ep), second(ep), topic, topic + "_g")
