"""`rocketport admin`: mqadmin's verbs and flags over the remoting protocol.

Talks to a name server (-n, else the NAMESRV_ADDR environment variable, as mqadmin) to find
brokers, then to brokers, exactly as mqadmin does, so it works against Rocketport or against
Apache RocketMQ. Results print as rich tables at a terminal; --output json or plain (the
default when stdout is not a terminal) give every value whole, for scripts and for copying
ids into queryMsgById.
It only sends requests a real broker answers the same way; it never reads a store. For a
broker with aclEnable, ROCKETPORT_ACCESS_KEY / ROCKETPORT_SECRET_KEY sign every request.
"""

from __future__ import annotations

import argparse
import asyncio
import contextvars
import datetime
import os
import ssl
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson
from rich.console import Console
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

from rocketport import consumer_status as status_view
from rocketport.client import AdminClient, ClientError
from rocketport.client.rebalance import allocate_averagely
from rocketport.common.message import MessageExt, encode_properties
from rocketport.protocols.remoting import RemotingCommand, bodies, mq_tables
from rocketport.protocols.remoting.client import request
from rocketport.protocols.remoting.codes import RequestCode, ResponseCode
from rocketport.protocols.remoting.headers import (
    CloneGroupOffsetRequestHeader,
    SendMessageRequestHeader,
    encode_header,
)
from rocketport.protocols.remoting.kv_config import ORDER_TOPIC_CONFIG
from rocketport.protocols.remoting.messages import (
    MessageClientIdGenerator,
    decode_message_ext_records,
    decode_offset_msg_id,
    encode_offset_msg_id,
)

AUTO_CREATE_TOPIC = "TBW102"  # the template topic brokers that create topics on send publish
SELF_TEST_TOPIC = "SELF_TEST_TOPIC"  # where clusterRT sends, as RocketMQ's system self-test topic
NEW_TOPIC_QUEUE_NUMS = 4  # queues a topic created on send asks for (RocketMQ producers' default)
NAMESRV_ENV = "NAMESRV_ADDR"  # what mqadmin and RocketMQ clients read when -n is not given
DEFAULT_NAMESRV = "127.0.0.1:9876"


class AdminError(Exception):
    """A request failed; the message is what the user sees."""


class _Unreachable(AdminError):
    """No connection (as opposed to an answer with an error code): another server may answer."""


def _credentials() -> tuple[str, str] | None:
    """ROCKETPORT_ACCESS_KEY / ROCKETPORT_SECRET_KEY sign requests for a broker with
    aclEnable (environment, not flags: a secret stays out of process listings)."""
    access_key = os.environ.get("ROCKETPORT_ACCESS_KEY")
    return (access_key, os.environ.get("ROCKETPORT_SECRET_KEY", "")) if access_key else None


def _tls(args: argparse.Namespace) -> ssl.SSLContext | None:
    """--tls (with --tls-ca for a private CA, --tls-cert/--tls-key for mutual TLS): the
    context every connection of the run uses; None for plaintext."""
    if not (getattr(args, "tls", False) or getattr(args, "tls_ca", None)):
        return None
    try:
        context = ssl.create_default_context(cafile=args.tls_ca)
        if args.tls_cert:
            context.load_cert_chain(args.tls_cert, args.tls_key)
    except (OSError, ssl.SSLError) as exc:
        raise AdminError(f"TLS: {exc}") from None
    return context


# The run's AdminClient (rocketport.client): one connection per server for the whole verb,
# every request signed when credentials are set.
_CLIENT: contextvars.ContextVar[AdminClient] = contextvars.ContextVar("admin_client")


async def _invoke(addr: str, cmd: RemotingCommand, ok: tuple[int, ...] = (ResponseCode.SUCCESS,)) -> RemotingCommand:
    try:
        return await _CLIENT.get().request(addr, cmd, ok)
    except ClientError as exc:
        raise _admin_error(addr, exc) from None


async def _call(addr: str, call: Awaitable[Any]) -> Any:
    """An AdminClient method's result, its failure worded as `_invoke` words them."""
    try:
        return await call
    except ClientError as exc:
        raise _admin_error(addr, exc) from None


def _admin_error(addr: str, exc: ClientError) -> AdminError:
    if exc.code is None:  # no answer: another server may give one
        return _Unreachable(f"cannot reach {addr}: {exc.remark}")
    return AdminError(f"{addr} answered code {exc.code}: {exc.remark}")


def namesrv_addrs(namesrv: str | None) -> list[str]:
    """-n wins; without it NAMESRV_ADDR, as mqadmin; without either the local default.
    Several servers are separated by ';' (RocketMQ's form)."""
    text = namesrv or os.environ.get(NAMESRV_ENV, "").strip() or DEFAULT_NAMESRV
    addrs = [a.strip() for a in text.split(";") if a.strip()]
    if not addrs:
        raise AdminError(f"no name server address in {text!r}")
    return addrs


async def _ask_namesrv(args: argparse.Namespace, cmd: Callable[[], RemotingCommand],
                       ok: tuple[int, ...] = (ResponseCode.SUCCESS,)) -> RemotingCommand:
    """The answer of the first name server reachable, trying them in order as clients do."""
    unreachable: list[str] = []
    for addr in namesrv_addrs(args.namesrv):
        try:
            return await _invoke(addr, cmd(), ok)
        except _Unreachable as exc:
            unreachable.append(str(exc))
    raise AdminError("; ".join(unreachable))


async def _route(args: argparse.Namespace, topic: str) -> bodies.TopicRouteData:
    resp = await _ask_namesrv(args, lambda: request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}))
    return bodies.decode_body(bodies.TopicRouteData, resp.body)


async def _route_if_known(args: argparse.Namespace, topic: str) -> bodies.TopicRouteData | None:
    resp = await _ask_namesrv(args, lambda: request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}),
                              (ResponseCode.SUCCESS, ResponseCode.TOPIC_NOT_EXIST))
    route = bodies.decode_body(bodies.TopicRouteData, resp.body) if resp.code == ResponseCode.SUCCESS else None
    return route if route is not None and route.queue_datas else None


async def _send_route(args: argparse.Namespace, topic: str) -> tuple[bodies.TopicRouteData, bool]:
    """Where to send, and whether the topic is new (no route yet).

    A new topic goes where a RocketMQ producer sends it: a broker in the route of the
    auto-create topic TBW102, which a broker with autoCreateTopicEnable publishes; the broker
    creates the topic on the first send. A standalone name server that has no TBW102 route
    (`rocketport namesrv` registers real topics only) leaves every master: the broker is the
    one that knows autoCreateTopicEnable, and refuses the send if it is off."""
    route = await _route_if_known(args, topic)
    if route is not None:
        return route, False
    route = await _route_if_known(args, AUTO_CREATE_TOPIC)
    if route is not None:
        return route, True
    info = await _cluster(args)
    datas = [d for _, d in sorted(info.broker_addr_table.items()) if 0 in d.broker_addrs]
    if not datas:
        raise AdminError(f"topic {topic} has no route and the name server knows no broker")
    queues = [bodies.QueueData(d.broker_name, NEW_TOPIC_QUEUE_NUMS, NEW_TOPIC_QUEUE_NUMS) for d in datas]
    return bodies.TopicRouteData(queues, datas), True


async def _cluster(args: argparse.Namespace) -> bodies.ClusterInfo:
    resp = await _ask_namesrv(args, lambda: request(RequestCode.GET_BROKER_CLUSTER_INFO))
    return bodies.decode_body(bodies.ClusterInfo, resp.body)


async def _target_brokers(args: argparse.Namespace) -> list[str]:
    """-b names one broker address; -c every master of a cluster; neither: every master."""
    if getattr(args, "broker", None):
        return [args.broker]
    info = await _cluster(args)
    names = info.cluster_addr_table.get(args.cluster, []) if getattr(args, "cluster", None) \
        else list(info.broker_addr_table)
    addrs = [info.broker_addr_table[n].broker_addrs.get(0) for n in names if n in info.broker_addr_table]
    if not addrs:
        raise AdminError("no broker found (give -b broker address or -c cluster)")
    return [a for a in addrs if a]


def _master(route: bodies.TopicRouteData, broker_name: str) -> str:
    for data in route.broker_datas:
        if data.broker_name == broker_name and 0 in data.broker_addrs:
            return data.broker_addrs[0]
    raise AdminError(f"no master address for broker {broker_name}")


def _ms(ts: int) -> str:
    return datetime.datetime.fromtimestamp(ts / 1000).isoformat(sep=" ", timespec="milliseconds") if ts > 0 else "-"


# ------------------------------------------------------------------ output
OUTPUT_FORMATS = ("table", "json", "plain")
TABLE_BODY_CHARS = 80  # a table shows a body's start; plain and json show all of it


def output_format(requested: str | None, console: Console) -> str:
    """--output if given; else a table for a person at a terminal, plain for a pipe (where
    a table would be cut to the 80 columns rich assumes and ids lost)."""
    return requested or ("table" if console.is_terminal else "plain")


@dataclass(slots=True)
class _Section:
    title: str
    columns: tuple[str, ...]
    rows: list[tuple[Any, ...]]
    record: bool  # one object (key/value table, JSON object), not a list of rows


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list)):
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS).decode()
    return str(value)


_PLAIN_ESCAPES = str.maketrans({"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"})


class Report:
    """A verb's results, printed when complete in the format --output chose.

    table: rich tables; one wider than the terminal shows each row as a key/value block
    instead, so no id is cut or folded (it must stay copyable into queryMsgById).
    plain: per section a header line and tab-separated rows (tab, newline and backslash
    escaped), sections apart by a blank line; nothing is truncated.
    json: one document; a verb's only section as a list of row objects (or an object for a
    record); a verb with several sections or totals gets an object of them. A verb always
    makes the same sections, so its document's shape does not depend on the data.
    Remarks (note) go to stderr unless tables are printed, so stdout stays parseable.
    """

    def __init__(self, fmt: str, console: Console, remarks: Console | None = None) -> None:
        if fmt not in OUTPUT_FORMATS:
            raise AdminError(f"unknown output format {fmt!r}")
        self.fmt = fmt
        self.console = console
        self.remarks = remarks or Console(stderr=True)
        self._sections: dict[str, _Section] = {}
        self._totals: dict[str, tuple[Any, str]] = {}
        self._document: Any = None

    def rows(self, name: str, columns: Sequence[str], rows: Iterable[Sequence[Any]] = (),
             *, title: str = "") -> None:
        """Add rows to the section ``name`` (created, empty, on first use)."""
        section = self._sections.setdefault(name, _Section(title, tuple(columns), [], False))
        section.rows.extend(tuple(row) for row in rows)

    def record(self, name: str, fields: Mapping[str, Any], *, title: str = "") -> None:
        self._sections[name] = _Section(title, tuple(fields), [tuple(fields.values())], True)

    def total(self, name: str, value: Any, label: str) -> None:
        """A summary value: ``label: value`` under tables, a key of the JSON object."""
        self._totals[name] = (value, label)

    def document(self, obj: Any) -> None:
        """A result that is already one JSON object (a route): printed as JSON in every format."""
        self._document = obj

    def say(self, text: str, **done: Any) -> None:
        """The outcome of a verb that changes something ("create topic ... success."): the
        text as mqadmin words it, and under --output json a row of ``done`` in "results"."""
        if self.fmt == "json":
            self.rows("results", (*done, "result"), [(*done.values(), "success")])
        (self.remarks if self.fmt == "json" else self.console).print(text, markup=False, highlight=False,
                                                                     soft_wrap=True)

    def note(self, text: str) -> None:
        """An aside next to results (a broker where the group is offline)."""
        (self.console if self.fmt == "table" else self.remarks).print(text, markup=False, highlight=False,
                                                                      soft_wrap=True)

    def emit(self) -> None:
        if not (self._sections or self._totals or self._document is not None):
            return  # a verb that printed as it went (clusterList -i, startMonitoring)
        if self.fmt == "json" or (self._document is not None and self.fmt == "plain"):
            self._write(orjson.dumps(self._json(), option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS).decode())
        elif self._document is not None:
            self.console.print_json(orjson.dumps(self._document, option=orjson.OPT_NON_STR_KEYS).decode())
        elif self.fmt == "plain":
            self._emit_plain()
        else:
            self._emit_tables()

    def _write(self, text: str) -> None:
        self.console.file.write(text + "\n")
        self.console.file.flush()

    def _json(self) -> Any:
        if self._document is not None:
            return self._document
        out: dict[str, Any] = {}
        for name, s in self._sections.items():
            rows = [dict(zip(s.columns, row)) for row in s.rows]
            out[name] = rows[0] if s.record else rows
        if len(out) == 1 and not self._totals:
            return next(iter(out.values()))
        out.update((name, value) for name, (value, _) in self._totals.items())
        return out

    def _emit_plain(self) -> None:
        blocks = []
        for s in self._sections.values():
            blocks.append("\n".join("\t".join(_text(v).translate(_PLAIN_ESCAPES) for v in row)
                                    for row in [s.columns, *s.rows]))
        for name, (value, _) in self._totals.items():
            blocks.append(f"{name}\n{_text(value).translate(_PLAIN_ESCAPES)}")
        if blocks:
            self._write("\n\n".join(blocks))

    def _cell(self, column: str, value: Any) -> Text:
        text = _text(value)
        if column == "body" and len(text) > TABLE_BODY_CHARS:
            text = text[:TABLE_BODY_CHARS] + "…"
        return Text(text)  # never markup: a body or key may contain [brackets]

    def _emit_tables(self) -> None:
        for s in self._sections.values():
            table = Table(title=s.title or None)
            for col in s.columns:
                table.add_column(col, overflow="fold")
            for row in s.rows:
                table.add_row(*(self._cell(c, v) for c, v in zip(s.columns, row)))
            if s.record or self._narrowest(table) > self.console.width:
                self._print_blocks(s)
            else:
                self.console.print(table)
        for value, label in self._totals.values():
            self.console.print(f"{label}: {_text(value)}", markup=False, highlight=False)

    def _narrowest(self, table: Table) -> int:
        """The table's width with every word whole (text wraps at spaces; an id has none),
        measured unclamped: console.measure stops at the console's width."""
        options = self.console.options.update_width(1 << 20)
        return Measurement.get(self.console, options, table).minimum

    def _print_blocks(self, s: _Section) -> None:
        """One key/value table per row: an id gets the whole width but the key column's."""
        if s.title:
            self.console.print(s.title, markup=False, highlight=False, style="italic")
        for row in s.rows:
            block = Table(show_header=False)
            block.add_column("field", no_wrap=True)
            block.add_column("value", overflow="fold")
            for col, value in zip(s.columns, row):
                block.add_row(col, self._cell(col, value))
            self.console.print(block)


# ------------------------------------------------------------------ messages
MESSAGE_COLUMNS = ("topic", "queueId", "queueOffset", "msgId", "offsetMsgId", "tags", "keys",
                   "bornTimestamp", "storeTimestamp", "body")


def _offset_msg_id(m: MessageExt) -> str:
    """What queryMsgById takes: where the message is stored (RocketMQ's MessageExt.msgId)."""
    return encode_offset_msg_id(m.store_host[0], m.store_host[1], m.commit_log_offset)


def _message_row(m: MessageExt) -> tuple[Any, ...]:
    return (m.topic, m.queue_id, m.queue_offset, m.uniq_key or "", _offset_msg_id(m), m.tags or "",
            " ".join(m.keys), _ms(m.born_timestamp), _ms(m.store_timestamp), m.body.decode("utf-8", "replace"))


def _message_record(m: MessageExt) -> dict[str, Any]:
    return {"topic": m.topic, "tags": m.tags or "", "keys": " ".join(m.keys), "msgId": m.uniq_key or "",
            "offsetMsgId": _offset_msg_id(m), "queueId": m.queue_id, "queueOffset": m.queue_offset,
            "commitLogOffset": m.commit_log_offset, "reconsumeTimes": m.reconsume_times,
            "bornTimestamp": _ms(m.born_timestamp), "storeTimestamp": _ms(m.store_timestamp),
            "bornHost": "%s:%d" % m.born_host, "storeHost": "%s:%d" % m.store_host,
            "properties": dict(m.properties), "body": m.body.decode("utf-8", "replace")}


# ------------------------------------------------------------------ verbs
async def update_topic(args: argparse.Namespace, out: Report) -> None:
    for addr in await _target_brokers(args):
        await _call(addr, _CLIENT.get().create_topic(
            args.topic, read_queue_nums=args.read_queue_nums, write_queue_nums=args.write_queue_nums,
            perm=args.perm, order=args.order, broker_addr=addr))
        out.say(f"create topic to {addr} success.", broker=addr, topic=args.topic)


SCRAM_PASSWORD_ENV = "ROCKETPORT_SCRAM_PASSWORD"


async def update_scram_credential(args: argparse.Namespace, out: Report) -> None:
    """Salt and hash a Kafka SCRAM password into the broker's credential file (local, as
    kafka-configs --add-config writes it): the password from $ROCKETPORT_SCRAM_PASSWORD or
    the terminal, never a flag, and never stored in clear."""
    from rocketport.core.auth.scram import ScramCredentials, ScramError
    password = os.environ.get(SCRAM_PASSWORD_ENV)
    if password is None:
        import getpass
        password = getpass.getpass(f"password for {args.user}: ")
    try:
        ScramCredentials(args.file).set(args.user, args.mechanism, password, args.iterations)
    except ScramError as exc:
        raise AdminError(str(exc)) from None
    out.say(f"updated {args.mechanism} credential of {args.user} in {args.file}.", user=args.user,
            mechanism=args.mechanism)


async def delete_scram_credential(args: argparse.Namespace, out: Report) -> None:
    from rocketport.core.auth.scram import ScramCredentials
    if not ScramCredentials(args.file).delete(args.user, args.mechanism):
        raise AdminError(f"no {args.mechanism} credential of {args.user} in {args.file}")
    out.say(f"deleted {args.mechanism} credential of {args.user}.", user=args.user, mechanism=args.mechanism)


async def delete_topic(args: argparse.Namespace, out: Report) -> None:
    for addr in await _target_brokers(args):
        await _call(addr, _CLIENT.get().delete_topic(args.topic, broker_addr=addr))
        out.say(f"delete topic [{args.topic}] from {addr} success.", broker=addr, topic=args.topic)


async def topic_list(args: argparse.Namespace, out: Report) -> None:
    """Topic names; with -c each topic's cluster and consumer groups (as mqadmin topicList -c)."""
    resp = await _ask_namesrv(args, lambda: request(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER))
    topics = bodies.decode_body(bodies.TopicList, resp.body).topic_list
    if not args.clusters:
        out.rows("topics", ("topic",), ((t,) for t in topics))
        return
    columns = ("cluster", "topic", "consumerGroup")
    out.rows("topics", columns)
    for topic in topics:
        route = await _route_if_known(args, topic)
        for data in route.broker_datas if route else ():
            addr = data.broker_addrs.get(0)
            if not addr:
                continue
            who = await _invoke(addr, request(RequestCode.QUERY_TOPIC_CONSUME_BY_WHO, {"topic": topic}))
            groups = orjson.loads(bytes(who.body)).get("groupList", []) or [""]
            out.rows("topics", columns, ((data.cluster, topic, g) for g in sorted(groups)))


async def topic_route(args: argparse.Namespace, out: Report) -> None:
    out.document(bodies.body_to_json_obj(await _route(args, args.topic)))


async def topic_status(args: argparse.Namespace, out: Report) -> None:
    route = await _route(args, args.topic)
    columns = ("brokerName", "queueId", "minOffset", "maxOffset", "lastUpdated")
    out.rows("queues", columns, title=f"topic {args.topic}")
    for q in route.queue_datas:
        resp = await _invoke(_master(route, q.broker_name),
                             request(RequestCode.GET_TOPIC_STATS_INFO, {"topic": args.topic}))
        stats = mq_tables.loads(resp.body).get("offsetTable", {})
        out.rows("queues", columns, ((mq.broker_name, mq.queue_id, o["minOffset"], o["maxOffset"],
                                      _ms(o.get("lastUpdateTimestamp", 0))) for mq, o in sorted(stats.items())))


async def _runtime(addr: str) -> dict[str, Any]:
    """A broker's runtime table; values that are numbers become numbers (the wire has text)."""
    resp = await _invoke(addr, request(RequestCode.GET_BROKER_RUNTIME_INFO))
    return {k: _number(v) for k, v in bodies.decode_body(bodies.KVTable, resp.body).table.items()}


def _number(text: str) -> Any:
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text) if text.strip() else text
    except ValueError:
        return text


def _day_counts(rt: dict[str, Any]) -> tuple[Any, Any, Any, Any]:
    """(put yesterday, got yesterday, put today, got today) from RocketMQ's runtime keys, as
    its clusterList computes them."""
    def diff(later: str, earlier: str) -> Any:
        a, b = rt.get(later), rt.get(earlier)
        return a - b if isinstance(a, int) and isinstance(b, int) else "?"
    return (diff("msgPutTotalTodayMorning", "msgPutTotalYesterdayMorning"),
            diff("msgGetTotalTodayMorning", "msgGetTotalYesterdayMorning"),
            diff("msgPutTotalTodayNow", "msgPutTotalTodayMorning"),
            diff("msgGetTotalTodayNow", "msgGetTotalTodayMorning"))


def _tps(value: Any) -> Any:
    """The first (10 s) figure of RocketMQ's "a b c" TPS text."""
    return _number(value.split()[0]) if isinstance(value, str) and value.split() else value


async def _rounds(out: Report, interval: float | None, rounds: int,
                  fill: Callable[[Report, int], Awaitable[None]]) -> None:
    """One report filled by ``fill`` into ``out``; with an ``interval``, a report a round,
    each printed when complete (a blank line apart), ``rounds`` of them (0: until
    interrupted), as mqadmin's watching verbs print."""
    if interval is None:
        await fill(out, 1)
        return
    n = 0
    while not rounds or n < rounds:
        n += 1
        if n > 1:
            await asyncio.sleep(interval)
            out.console.file.write("\n")
        report = Report(out.fmt, out.console, out.remarks)
        await fill(report, n)
        report.emit()


async def cluster_list(args: argparse.Namespace, out: Report) -> None:
    """Brokers per cluster with their rates; -m adds yesterday's and today's counts; -i N
    prints again every N seconds (-r rounds, 0: until interrupted), as mqadmin's clusterList."""
    columns = ("cluster", "brokerName", "brokerId", "address", "version", "inTps", "outTps", "topics",
               "role", "ha")
    if args.more:
        columns += ("putYesterday", "getYesterday", "putToday", "getToday")

    async def fill(report: Report, _: int) -> None:
        report.rows("brokers", columns, title="clusters")
        info = await _cluster(args)
        for cluster, names in sorted(info.cluster_addr_table.items()):
            for name in sorted(names):
                for broker_id, addr in sorted(info.broker_addr_table[name].broker_addrs.items()):
                    try:
                        rt = await _runtime(addr)
                    except AdminError:
                        rt = {}
                    row = (cluster, name, broker_id, addr, rt.get("brokerVersionDesc", "?"),
                           _tps(rt.get("putTps", "?")), _tps(rt.get("getTransferedTps", "?")),
                           rt.get("topicCount", "?"), rt.get("brokerRole", "?"), _ha_state(rt))
                    report.rows("brokers", columns, [row + (_day_counts(rt) if args.more else ())])

    await _rounds(out, args.interval, args.rounds, fill)


def _ha_state(rt: dict[str, str]) -> str:
    """A broker's replication in a few words (its runtime info's ha* keys, core/ha): a
    master's slaves in sync and the furthest behind; a slave's offset and lag (bytes, and
    seconds since its master's last frame)."""
    if "haSlaves" in rt:
        try:
            slaves = orjson.loads(rt["haSlaves"])
        except ValueError:
            return "?"
        if not slaves:
            return "no slave"
        lag = max(int(slave.get("lagBytes", 0)) for slave in slaves)
        return f"{rt.get('haInSyncSlaves', '?')}/{len(slaves)} slaves in sync, max lag {lag} B"
    if "haSlaveOffset" in rt:
        if rt.get("haDiverged"):
            return f"DIVERGED at {rt['haSlaveOffset']}"
        if rt.get("haSlaveConnected") != "true":
            return f"offset {rt['haSlaveOffset']}, not connected to {rt.get('haMasterAddress') or '?'}"
        last = int(rt.get("haSlaveLastFrameMs", "0") or 0)
        ago = max(0.0, time.time() - last / 1000) if last else 0.0
        return f"offset {rt['haSlaveOffset']}, lag {rt.get('haSlaveLagBytes', '?')} B, {ago:.1f} s"
    return "-"


async def broker_status(args: argparse.Namespace, out: Report) -> None:
    out.rows("runtime", ("broker", "key", "value"), title="broker runtime")
    for addr in await _target_brokers(args):
        out.rows("runtime", ("broker", "key", "value"),
                 ((addr, k, v) for k, v in sorted((await _runtime(addr)).items())))


async def get_broker_config(args: argparse.Namespace, out: Report) -> None:
    out.rows("config", ("broker", "key", "value"), title="broker config")
    for addr in await _target_brokers(args):
        body = bytes((await _invoke(addr, request(RequestCode.GET_BROKER_CONFIG))).body).decode("utf-8")
        out.rows("config", ("broker", "key", "value"),
                 ((addr, *line.partition("=")[::2]) for line in sorted(body.splitlines())))


async def update_broker_config(args: argparse.Namespace, out: Report) -> None:
    for addr in await _target_brokers(args):
        await _invoke(addr, request(RequestCode.UPDATE_BROKER_CONFIG, {}, f"{args.key}={args.value}\n".encode()))
        out.say(f"update broker config success, {addr}", broker=addr, key=args.key, value=args.value)


async def _broker_operation(args: argparse.Namespace, out: Report, code: RequestCode, what: str) -> None:
    for addr in await _target_brokers(args):
        await _invoke(addr, request(code))
        out.say(f"{what} on {addr} success.", broker=addr)


async def clean_expired_cq(args: argparse.Namespace, out: Report) -> None:
    await _broker_operation(args, out, RequestCode.CLEAN_EXPIRED_CONSUMEQUEUE, "clean expired consume queues")


async def clean_unused_topic(args: argparse.Namespace, out: Report) -> None:
    await _broker_operation(args, out, RequestCode.CLEAN_UNUSED_TOPIC, "clean unused topics")


async def delete_expired_commit_log(args: argparse.Namespace, out: Report) -> None:
    await _broker_operation(args, out, RequestCode.DELETE_EXPIRED_COMMITLOG, "delete expired commit log")


async def _broker_consume_stats(addr: str, order: bool = False) -> tuple[list[tuple[str, Any, dict]], int]:
    """A broker's GET_BROKER_CONSUME_STATS: (group, queue, offsets) of every queue of every
    subscription group, and the broker's total lag."""
    resp = await _invoke(addr, request(RequestCode.GET_BROKER_CONSUME_STATS,
                                       {"isOrder": "true" if order else "false"}))
    stats = mq_tables.loads(resp.body)
    queues = [(group, mq, o) for by_group in stats.get("consumeStatsList", [])
              for group, per_topic in sorted(by_group.items()) for consume in per_topic
              for mq, o in sorted(consume.get("offsetTable", {}).items())]
    return queues, stats.get("totalDiff", 0)


async def broker_consume_stats(args: argparse.Namespace, out: Report) -> None:
    """Every group's lag per queue on each broker (GET_BROKER_CONSUME_STATS), queues whose
    lag is at least -l."""
    columns = ("broker", "group", "topic", "queueId", "brokerOffset", "consumerOffset", "diff", "lastTime")
    out.rows("queues", columns, title="consume stats")
    total = 0
    for addr in await _target_brokers(args):
        queues, diff_total = await _broker_consume_stats(addr, args.order)
        for group, mq, o in queues:
            diff = o["brokerOffset"] - o["consumerOffset"]
            if diff >= args.diff_level:
                out.rows("queues", columns, [(addr, group, mq.topic, mq.queue_id, o["brokerOffset"],
                                              o["consumerOffset"], diff, _ms(o.get("lastTimestamp", 0)))])
        total += diff_total
    out.total("diffTotal", total, "Diff Total")


async def _stats_data(addr: str, name: str, key: str) -> dict[str, Any] | None:
    """A broker's VIEW_BROKER_STATS_DATA for one item; None when the broker has no such item
    (statsAll skips it, as mqadmin does)."""
    try:
        resp = await _invoke(addr, request(RequestCode.VIEW_BROKER_STATS_DATA,
                                           {"statsName": name, "statsKey": key}))
    except AdminError:
        return None
    return orjson.loads(bytes(resp.body))


def _sum_24h(data: dict[str, Any]) -> int:
    """mqadmin's compute24HourSum: the day window's sum, else the hour's, else the minute's."""
    for span in ("statsDay", "statsHour", "statsMinute"):
        if data[span]["sum"]:
            return int(data[span]["sum"])
    return 0


async def _rates(masters: list[str], name: str, key: str) -> tuple[float, int]:
    """(TPS over the last minute, messages over the last 24 hours) of one stats item,
    summed over the masters serving the topic."""
    tps, day = 0.0, 0
    for addr in masters:
        data = await _stats_data(addr, name, key)
        if data is not None:
            tps += data["statsMinute"]["tps"]
            day += _sum_24h(data)
    return tps, day


async def stats_all(args: argparse.Namespace, out: Report) -> None:
    """Per topic and consumer group: the lag, in and out TPS over the last minute and
    messages in and out over 24 hours (mqadmin statsAll; -a active topics only, -t one
    topic). Retry and dead-letter topics are left out, as mqadmin leaves them."""
    resp = await _ask_namesrv(args, lambda: request(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER))
    topics = bodies.decode_body(bodies.TopicList, resp.body).topic_list
    columns = ("topic", "consumerGroup", "accumulation", "inTps", "outTps", "inMsg24Hour", "outMsg24Hour")
    out.rows("stats", columns, title="topic and consumer group rates")
    for topic in sorted(topics):
        if topic.startswith(("%RETRY%", "%DLQ%")) or (args.topic and topic != args.topic):
            continue
        route = await _route_if_known(args, topic)
        masters = [d.broker_addrs[0] for d in (route.broker_datas if route else ()) if d.broker_addrs.get(0)]
        in_tps, in_day = await _rates(masters, "TOPIC_PUT_NUMS", topic)
        groups: set[str] = set()
        for addr in masters:
            who = await _invoke(addr, request(RequestCode.QUERY_TOPIC_CONSUME_BY_WHO, {"topic": topic}))
            groups.update(orjson.loads(bytes(who.body)).get("groupList", []))
        if not groups:
            if not args.active or in_day:
                out.rows("stats", columns, [(topic, "", 0, round(in_tps, 2), "", in_day, "NO_CONSUMER")])
            continue
        for group in sorted(groups):
            out_tps, out_day = await _rates(masters, "GROUP_GET_NUMS", f"{topic}@{group}")
            lag = 0
            for addr in masters:
                stats = await _invoke(addr, request(RequestCode.GET_CONSUME_STATS,
                                                    {"consumerGroup": group, "topic": topic}))
                lag += sum(o["brokerOffset"] - o["consumerOffset"]
                           for o in mq_tables.loads(stats.body).get("offsetTable", {}).values())
            if not args.active or in_day or out_day:
                out.rows("stats", columns, [(topic, group, max(lag, 0), round(in_tps, 2), round(out_tps, 2),
                                             in_day, out_day)])


async def _amqp_view(addr: str) -> dict[str, Any]:
    resp = await _invoke(addr, request(RequestCode.GET_FRONTEND_VIEW, {"name": "amqp"}))
    return orjson.loads(bytes(resp.body))


def _binding(key: str, arguments: dict[str, Any]) -> str:
    return key + (" " + _text(arguments) if arguments else "")


async def amqp_exchanges(args: argparse.Namespace, out: Report) -> None:
    columns = ("broker", "name", "type", "durable", "autoDelete", "internal", "arguments", "boundTo")
    out.rows("exchanges", columns, title="AMQP exchanges (vhost /)")
    for addr in await _target_brokers(args):
        out.rows("exchanges", columns, (
            (addr, e["name"], e["type"], e["durable"], e["autoDelete"], e["internal"], e["arguments"],
             [f"{b['destination']} <- {_binding(b['routingKey'], b['arguments'])}" for b in e["exchangeBindings"]])
            for e in (await _amqp_view(addr))["exchanges"]))


async def amqp_queues(args: argparse.Namespace, out: Report) -> None:
    columns = ("broker", "name", "durable", "exclusive", "autoDelete", "consumers", "messagesReady",
               "bindings", "arguments")
    out.rows("queues", columns, title="AMQP queues (vhost /)")
    for addr in await _target_brokers(args):
        out.rows("queues", columns, (
            (addr, q["name"], q["durable"], q["exclusive"], q["autoDelete"], q["consumers"], q["messagesReady"],
             [f"{b['exchange']} -> {_binding(b['routingKey'], b['arguments'])}" for b in q["bindings"]],
             q["arguments"])
            for q in (await _amqp_view(addr))["queues"]))


async def update_sub_group(args: argparse.Namespace, out: Report) -> None:
    for addr in await _target_brokers(args):
        await _call(addr, _CLIENT.get().create_group(
            args.group, retry_max_times=args.retry_max_times, retry_queue_nums=args.retry_queue_nums,
            broadcast=args.broadcast, consume_enable=args.consume_enable,
            consume_from_min_enable=args.consume_from_min, broker_id=args.broker_id,
            which_broker_when_consume_slowly=args.which_broker_when_consume_slowly,
            notify_consumer_ids_changed_enable=args.notify_consumer_ids_changed, broker_addr=addr))
        out.say(f"create subscription group to {addr} success.", broker=addr, group=args.group)


async def delete_sub_group(args: argparse.Namespace, out: Report) -> None:
    for addr in await _target_brokers(args):
        await _call(addr, _CLIENT.get().delete_group(args.group, broker_addr=addr))
        out.say(f"delete subscription group [{args.group}] from {addr} success.", broker=addr,
                group=args.group)


async def consumer_progress(args: argparse.Namespace, out: Report) -> None:
    topics = [args.topic] if args.topic else []
    if not topics:  # the group's subscriptions, from a broker that has it online
        for addr in await _target_brokers(args):
            resp = await _invoke(addr, request(RequestCode.GET_CONSUMER_CONNECTION_LIST,
                                               {"consumerGroup": args.group}),
                                 (ResponseCode.SUCCESS, ResponseCode.CONSUMER_NOT_ONLINE))
            if resp.code == ResponseCode.SUCCESS:
                topics = sorted(orjson.loads(bytes(resp.body)).get("subscriptionTable", {}))
                break
    # (broker, topic or None): a group that is not online (an AMQP queue, a Kafka group
    # between polls) is asked of every broker without a topic, which answers for each
    # topic the group has committed offsets on, as RocketMQ's broker does
    asks: list[tuple[str, str | None]] = []
    for topic in topics:
        route = await _route(args, topic)
        asks += [(_master(route, q.broker_name), topic) for q in route.queue_datas]
    if not asks:
        asks = [(addr, None) for addr in await _target_brokers(args)]
    columns = ("topic", "brokerName", "queueId", "brokerOffset", "consumerOffset", "diff")
    rows = []
    total = 0
    for addr, topic in asks:
        resp = await _invoke(addr, request(RequestCode.GET_CONSUME_STATS, {"consumerGroup": args.group,
                                                                           **({"topic": topic} if topic else {})}))
        for mq, o in sorted(mq_tables.loads(resp.body).get("offsetTable", {}).items()):
            hi, done = o["brokerOffset"], o["consumerOffset"]
            total += hi - done
            rows.append((mq.topic, mq.broker_name, mq.queue_id, hi, done, hi - done, o.get("metadata", "")))
    if not rows and not topics:
        raise AdminError(f"group {args.group} is not online and has no committed offsets; give -t topic")
    if args.show_client_ip:  # each queue's client, from the running info of the group's clients
        owners = await _queue_owners(args, args.group, out)
        columns = (*columns[:5], "clientIP", *columns[5:])
        rows = [(*row[:5], owners.get(row[:3], "N/A"), *row[5:]) for row in rows]
    if any(row[-1] for row in rows):  # Kafka consumers' commit metadata, when any was given
        out.rows("progress", columns + ("metadata",), rows, title=f"consumer progress of {args.group}")
    else:
        out.rows("progress", columns, [row[:-1] for row in rows], title=f"consumer progress of {args.group}")
    out.total("diffTotal", total, "Diff Total")


async def _group_clients(args: argparse.Namespace, group: str) -> tuple[str | None, list[str]]:
    """The broker to ask about the group's clients (-b, else the first of %RETRY%group's
    route, as mqadmin picks it) and the clients it has online; (None, []) if none."""
    addr = getattr(args, "broker", None)
    if not addr:
        try:
            addr = await _CLIENT.get().group_broker(group)
        except ClientError as exc:
            if exc.code == ResponseCode.TOPIC_NOT_EXIST:
                return None, []
            raise _admin_error("the name server", exc) from None
    resp = await _invoke(addr, request(RequestCode.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": group}),
                         (ResponseCode.SUCCESS, ResponseCode.CONSUMER_NOT_ONLINE))
    if resp.code != ResponseCode.SUCCESS:
        return addr, []
    return addr, sorted(c["clientId"] for c in orjson.loads(bytes(resp.body)).get("connectionSet", []))


async def _running_infos(addr: str, group: str, client_ids: list[str], jstack: bool,
                         out: Report) -> dict[str, Any]:
    """Each client's ConsumerRunningInfo (307, passed on by the broker at `addr`); a client
    that fails is named in a note and left out, as mqadmin goes on to the next."""
    infos = {}
    for client_id in client_ids:
        try:
            infos[client_id] = await _call(addr, _CLIENT.get().consumer_running_info(
                group, client_id, jstack=jstack, broker_addr=addr))
        except AdminError as exc:
            out.note(f"{client_id}: {exc}")
    return infos


async def _queue_owners(args: argparse.Namespace, group: str, out: Report) -> dict[tuple[str, str, int], str]:
    addr, client_ids = await _group_clients(args, group)
    return status_view.queue_owners(await _running_infos(addr, group, client_ids, False, out)) if addr else {}


async def consumer_status(args: argparse.Namespace, out: Report) -> None:
    """mqadmin consumerStatus: GET_CONSUMER_RUNNING_INFO (307), which the broker passes on
    to the client; every client of the group in summary, or one (-i) in detail."""
    addr, client_ids = await _group_clients(args, args.group)
    if args.client_id:
        if addr is None:
            raise AdminError(f"the consumer group {args.group} is not online")
        info = await _call(addr, _CLIENT.get().consumer_running_info(
            args.group, args.client_id, jstack=args.jstack, broker_addr=addr))
        out.rows("properties", ("key", "value"), sorted(info.properties.items()),
                 title=f"{args.client_id} of {args.group}")
        out.rows("subscriptions", status_view.SUBSCRIPTION_COLUMNS, status_view.subscription_rows(info),
                 title="subscriptions")
        out.rows("queues", status_view.QUEUE_COLUMNS, status_view.queue_rows(info), title="queues held")
        out.rows("status", status_view.STATUS_COLUMNS, status_view.status_rows(info), title="consume status per topic")
        if args.jstack:
            out.total("jstack", info.jstack or "", "jstack")
        return
    if not client_ids:
        raise AdminError(f"the consumer group {args.group} is not online")
    infos = await _running_infos(addr, args.group, client_ids, args.jstack, out)
    out.rows("clients", status_view.SUMMARY_COLUMNS,
             [status_view.summary_row(i, cid, infos[cid]) for i, cid in enumerate(sorted(infos), 1)],
             title=f"clients of {args.group}")
    out.rows("analysis", ("finding",), [(f,) for f in status_view.analysis(infos, int(time.time() * 1000))])


async def query_msg_by_id(args: argparse.Namespace, out: Report) -> None:
    try:
        ip, port, offset = decode_offset_msg_id(args.msg_id)
    except ValueError as exc:
        raise AdminError(str(exc)) from None
    resp = await _invoke(f"{ip}:{port}", request(RequestCode.VIEW_MESSAGE_BY_ID, {"offset": str(offset)}))
    out.record("message", _message_record(decode_message_ext_records(resp.body)[0]))


async def _query_messages(args: argparse.Namespace, topic: str, key: str, max_num: int,
                          unique: bool = False) -> list[MessageExt]:
    """QUERY_MESSAGE to each master of ``topic``: by KEYS, or (``unique``, RocketMQ's
    _UNIQUE_KEY_QUERY flag) by the client's unique message id."""
    route = await _route(args, topic)
    fields = {"topic": topic, "key": key, "maxNum": str(max_num), "beginTimestamp": "0",
              "endTimestamp": str(int(time.time() * 1000) + 60_000)}
    if unique:
        fields["_UNIQUE_KEY_QUERY"] = "true"
    found: list[MessageExt] = []
    for data in route.broker_datas:
        addr = data.broker_addrs.get(0)
        if addr:
            resp = await _invoke(addr, request(RequestCode.QUERY_MESSAGE, fields),
                                 (ResponseCode.SUCCESS, ResponseCode.QUERY_NOT_FOUND))
            if resp.code == ResponseCode.SUCCESS:
                found += decode_message_ext_records(resp.body)
    return found


async def query_msg_by_key(args: argparse.Namespace, out: Report) -> None:
    found = await _query_messages(args, args.topic, args.key, 64)
    out.rows("messages", MESSAGE_COLUMNS, map(_message_row, found), title=f"key {args.key} in {args.topic}")


async def _pull(addr: str, topic: str, queue_id: int, offset: int, count: int, group: str) -> RemotingCommand:
    return await _invoke(addr, request(RequestCode.PULL_MESSAGE, {
        "consumerGroup": group, "topic": topic, "queueId": str(queue_id), "queueOffset": str(offset),
        "maxMsgNums": str(count), "sysFlag": "0", "commitOffset": "0", "suspendTimeoutMillis": "0",
        "subscription": "*", "subVersion": "0"}),
        (ResponseCode.SUCCESS, ResponseCode.PULL_NOT_FOUND, ResponseCode.PULL_OFFSET_MOVED,
         ResponseCode.PULL_RETRY_IMMEDIATELY))


async def query_msg_by_offset(args: argparse.Namespace, out: Report) -> None:
    route = await _route(args, args.topic)
    resp = await _pull(_master(route, args.broker_name), args.topic, args.queue_id, args.offset, 1,
                       "TOOLS_CONSUMER")
    if resp.code != ResponseCode.SUCCESS:
        raise AdminError(f"no message at offset {args.offset} (code {resp.code})")
    out.record("message", _message_record(decode_message_ext_records(resp.body)[0]))


async def send_message(args: argparse.Namespace, out: Report) -> None:
    route, new_topic = await _send_route(args, args.topic)
    broker_name = args.broker_name or route.queue_datas[0].broker_name
    addr = _master(route, broker_name)
    properties = {"UNIQ_KEY": MessageClientIdGenerator().next_id(), "WAIT": "true"}
    if args.tags:
        properties["TAGS"] = args.tags
    if args.keys:
        properties["KEYS"] = args.keys
    header = SendMessageRequestHeader(
        "TOOLS_PRODUCER", args.topic, AUTO_CREATE_TOPIC, NEW_TOPIC_QUEUE_NUMS,
        args.queue_id if args.queue_id is not None else 0, 0, int(time.time() * 1000), 0,
        encode_properties(properties).decode())
    resp = await _invoke(addr, request(RequestCode.SEND_MESSAGE, encode_header(header), args.body.encode()),
                         (ResponseCode.SUCCESS, ResponseCode.TOPIC_NOT_EXIST))
    if resp.code == ResponseCode.TOPIC_NOT_EXIST:
        raise AdminError(f"topic {args.topic} does not exist and {addr} does not create topics on send "
                         f"(autoCreateTopicEnable is off); create it first: rocketport admin updateTopic "
                         f"-t {args.topic}")
    if new_topic:
        out.note(f"topic {args.topic} has no route at the name server yet: sent to {addr}, "
                 f"which creates topics on send")
    out.record("sent", {"brokerName": broker_name, "broker": addr, "queueId": _int(resp.ext_fields.get("queueId")),
                        "queueOffset": _int(resp.ext_fields.get("queueOffset")), "msgId": properties["UNIQ_KEY"],
                        "offsetMsgId": resp.ext_fields.get("msgId", ""), "status": "SEND_OK"})


def _int(text: str | None) -> int | None:
    return int(text) if text is not None and text.lstrip("-").isdigit() else None


async def consume_message(args: argparse.Namespace, out: Report) -> None:
    """Messages from each queue's start, or from -o / -s on the queues -b / -i pick, up to -e."""
    route = await _route(args, args.topic)
    messages: list[MessageExt] = []
    end_ms = _timestamp(args.end) if args.end else None
    for q in route.queue_datas:
        if args.broker_name and q.broker_name != args.broker_name:
            continue
        addr = _master(route, q.broker_name)
        for qid in range(q.read_queue_nums) if args.queue_id is None else (args.queue_id,):
            if len(messages) >= args.count:
                break
            f = {"topic": args.topic, "queueId": str(qid)}
            if args.offset is not None:
                offset = args.offset
            elif args.begin:
                offset = int((await _invoke(addr, request(RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, {
                    **f, "timestamp": str(_timestamp(args.begin))}))).ext_fields["offset"])
            else:
                offset = int((await _invoke(addr, request(RequestCode.GET_MIN_OFFSET, f))).ext_fields["offset"])
            resp = await _pull(addr, args.topic, qid, offset, args.count - len(messages), args.group)
            if resp.code == ResponseCode.SUCCESS:
                messages += [m for m in decode_message_ext_records(resp.body)
                             if end_ms is None or m.store_timestamp <= end_ms]
    out.rows("messages", MESSAGE_COLUMNS, map(_message_row, messages),
             title=f"{len(messages)} message(s) of {args.topic}")


async def consumer_connection(args: argparse.Namespace, out: Report) -> None:
    connections = ("broker", "clientId", "clientAddr", "language", "messageModel", "consumeFromWhere")
    subscriptions = ("broker", "topic", "expression", "expressionType")
    out.rows("connections", connections, title=f"consumers of {args.group}")
    out.rows("subscriptions", subscriptions, title="subscriptions")
    for addr in await _target_brokers(args):
        resp = await _invoke(addr, request(RequestCode.GET_CONSUMER_CONNECTION_LIST,
                                           {"consumerGroup": args.group}),
                             (ResponseCode.SUCCESS, ResponseCode.CONSUMER_NOT_ONLINE))
        if resp.code != ResponseCode.SUCCESS:
            out.note(f"{addr}: group {args.group} not online")
            continue
        info = orjson.loads(bytes(resp.body))
        out.rows("connections", connections, (
            (addr, c.get("clientId", ""), c.get("clientAddr", ""), str(c.get("language", "")),
             info.get("messageModel"), info.get("consumeFromWhere")) for c in info.get("connectionSet", [])))
        out.rows("subscriptions", subscriptions, (
            (addr, topic, sub.get("subString", ""), sub.get("expressionType", ""))
            for topic, sub in sorted(info.get("subscriptionTable", {}).items())))


async def producer_connection(args: argparse.Namespace, out: Report) -> None:
    out.rows("producers", ("broker", "clientId"), title=f"producers of {args.group}")
    for addr in await _target_brokers(args):
        resp = await _invoke(addr, request(RequestCode.GET_PRODUCER_CONNECTION_LIST,
                                           {"producerGroup": args.group}))
        out.rows("producers", ("broker", "clientId"),
                 ((addr, c.get("clientId", "")) for c in orjson.loads(bytes(resp.body)).get("connectionSet", [])))


def _timestamp(text: str) -> int:
    """mqadmin accepts ms since the epoch or yyyy-MM-dd#HH:mm:ss:SSS; "now" is allowed too."""
    if text == "now":
        return int(time.time() * 1000)
    if text.isdigit():
        return int(text)
    return int(datetime.datetime.strptime(text, "%Y-%m-%d#%H:%M:%S:%f").timestamp() * 1000)


async def reset_offset_by_time(args: argparse.Namespace, out: Report) -> None:
    columns = ("brokerName", "queueId", "offset")
    out.rows("offsets", columns, title=f"{args.group} reset on {args.topic}")
    route = await _route(args, args.topic)
    for data in route.broker_datas:
        addr = data.broker_addrs.get(0)
        if not addr:
            continue
        resp = await _invoke(addr, request(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, {
            "topic": args.topic, "group": args.group, "timestamp": str(_timestamp(args.timestamp)),
            "isForce": "true" if args.force else "false"}))
        out.rows("offsets", columns, ((mq.broker_name, mq.queue_id, offset) for mq, offset
                                      in sorted(mq_tables.loads(resp.body).get("offsetTable", {}).items())))


async def clone_group_offset(args: argparse.Namespace, out: Report) -> None:
    route = await _route(args, args.topic)
    for name in sorted({q.broker_name for q in route.queue_datas}):  # CLONE_GROUP_OFFSET per broker, as mqadmin
        await _invoke(_master(route, name), request(RequestCode.CLONE_GROUP_OFFSET, encode_header(
            CloneGroupOffsetRequestHeader(args.src_group, args.dest_group, args.topic))))
    out.say(f"clone group offset success. srcGroup[{args.src_group}], "
            f"destGroup[{args.dest_group}], topic[{args.topic}]",
            srcGroup=args.src_group, destGroup=args.dest_group, topic=args.topic)


async def _queue_messages(addr: str, topic: str, queue_id: int, begin: str | None, end: str | None,
                          limit: int) -> list[MessageExt]:
    """Up to ``limit`` messages of one queue stored from ``begin`` (else its min offset) to
    ``end`` (timestamps as `_timestamp` reads them)."""
    f = {"topic": topic, "queueId": str(queue_id)}
    if begin:
        start = int((await _invoke(addr, request(RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, {
            **f, "timestamp": str(_timestamp(begin))}))).ext_fields["offset"])
    else:
        start = int((await _invoke(addr, request(RequestCode.GET_MIN_OFFSET, f))).ext_fields["offset"])
    end_ms = _timestamp(end) if end else None
    messages: list[MessageExt] = []
    while len(messages) < limit:
        resp = await _pull(addr, topic, queue_id, start, min(32, limit - len(messages)), "TOOLS_CONSUMER")
        if resp.code != ResponseCode.SUCCESS:
            break
        batch = [m for m in decode_message_ext_records(resp.body) if end_ms is None or m.store_timestamp <= end_ms]
        messages += batch
        start = int(resp.ext_fields["nextBeginOffset"])
        if not batch:
            break
    return messages


async def print_msg(args: argparse.Namespace, out: Report) -> None:
    """mqadmin printMsg: -s a tag expression (``TagA || TagB``, ``*``), -d false leaves
    bodies out, -c the charset bodies are decoded with."""
    route = await _route(args, args.topic)
    tags = None if args.sub_expression.strip() == "*" else {t.strip() for t in args.sub_expression.split("||")}
    messages: list[MessageExt] = []
    for q in route.queue_datas:
        addr = _master(route, q.broker_name)
        for qid in range(q.read_queue_nums):
            messages += [m for m in await _queue_messages(addr, args.topic, qid, args.begin, args.end,
                                                          args.limit - len(messages))
                         if tags is None or m.tags in tags]
    rows = [(*_message_row(m)[:-1], m.body.decode(args.charset, "replace") if args.print_body else "")
            for m in messages]
    out.rows("messages", MESSAGE_COLUMNS, rows, title=f"{len(messages)} message(s) of {args.topic}")


async def print_msg_by_queue(args: argparse.Namespace, out: Report) -> None:
    route = await _route(args, args.topic)
    messages = await _queue_messages(_master(route, args.broker_name), args.topic, args.queue_id, args.begin,
                                     args.end, args.limit)
    out.rows("messages", MESSAGE_COLUMNS, map(_message_row, messages),
             title=f"{len(messages)} message(s) of {args.topic} {args.broker_name}:{args.queue_id}")


async def query_msg_by_unique_key(args: argparse.Namespace, out: Report) -> None:
    """QUERY_MESSAGE with the unique-key flag, as mqadmin's queryMsgByUniqueKey."""
    found = [m for m in await _query_messages(args, args.topic, args.msg_id, 32, unique=True)
             if m.properties.get("UNIQ_KEY") == args.msg_id]
    if not found:
        raise AdminError(f"no message with unique key {args.msg_id} in {args.topic}")
    if args.group and args.client_id:  # the client consumes it (309, passed on by its broker)
        m = found[0]
        result = await _call("%s:%d" % m.store_host, _CLIENT.get().consume_message_directly(
            args.group, args.client_id, _offset_msg_id(m)))
        out.record("result", {"order": result.order, "autoCommit": result.auto_commit,
                              "consumeResult": result.consume_result.name if result.consume_result else None,
                              "remark": result.remark, "spentTimeMills": result.spent_time_mills})
        return
    out.record("message", _message_record(found[0]))


async def topic_cluster_list(args: argparse.Namespace, out: Report) -> None:
    route = await _route(args, args.topic)
    clusters = sorted({data.cluster for data in route.broker_datas})
    out.rows("clusters", ("cluster",), ((c,) for c in clusters), title=f"clusters of {args.topic}")


async def update_topic_perm(args: argparse.Namespace, out: Report) -> None:
    if args.perm not in (2, 4, 6):
        raise AdminError(f"perm must be 2 (write), 4 (read) or 6 (read and write), got {args.perm}")
    route = await _route(args, args.topic)
    queues = {q.broker_name: q for q in route.queue_datas}
    targets = [d for d in route.broker_datas if (not args.broker_name or d.broker_name == args.broker_name)
               and (not args.cluster or d.cluster == args.cluster)]
    if not targets:
        raise AdminError(f"no broker of {args.topic} matches (brokers: {', '.join(sorted(queues))})")
    for data in targets:
        q, addr = queues[data.broker_name], data.broker_addrs.get(0)
        await _call(addr, _CLIENT.get().create_topic(
            args.topic, read_queue_nums=q.read_queue_nums, write_queue_nums=q.write_queue_nums,
            perm=args.perm, broker_addr=addr))
        out.say(f"update topic perm from {q.perm} to {args.perm} in {addr} success.", broker=addr,
                topic=args.topic, perm=args.perm)


async def allocate_mq(args: argparse.Namespace, out: Report) -> None:
    """How RocketMQ's average allocation spreads a topic's queues over the given client ids."""
    route = await _route(args, args.topic)
    queues = sorted((q.broker_name, qid) for q in route.queue_datas for qid in range(q.read_queue_nums))
    clients = sorted(c.strip() for c in args.ip_list.split(",") if c.strip())
    out.rows("allocation", ("client", "brokerName", "queueId"),
             ((c, b, q) for c in clients for b, q in allocate_averagely(queues, clients, c)),
             title=f"{args.topic} over {len(clients)} client(s)")


async def _timed_sends(addr: str, topic: str, queue_id: int, size: int, count: int) -> list[float]:
    """``count`` sends of ``size`` bytes to one broker queue; each one's round trip in ms."""
    body = b"x" * size
    times = []
    for _ in range(count):
        header = SendMessageRequestHeader("TOOLS_PRODUCER", topic, AUTO_CREATE_TOPIC, NEW_TOPIC_QUEUE_NUMS,
                                          queue_id, 0, int(time.time() * 1000), 0,
                                          encode_properties({"UNIQ_KEY": MessageClientIdGenerator().next_id(),
                                                             "WAIT": "true"}).decode())
        began = time.perf_counter()
        await _invoke(addr, request(RequestCode.SEND_MESSAGE, encode_header(header), body))
        times.append((time.perf_counter() - began) * 1000)
    return times


async def _broker_addr(args: argparse.Namespace, broker_name: str) -> str:
    data = (await _cluster(args)).broker_addr_table.get(broker_name)
    addr = data.broker_addrs.get(0) if data else None
    if not addr:
        raise AdminError(f"no master of broker {broker_name} is registered")
    return addr


async def send_msg_status(args: argparse.Namespace, out: Report) -> None:
    addr = await _broker_addr(args, args.broker_name)
    rts = await _timed_sends(addr, SELF_TEST_TOPIC, 0, args.message_size, args.count)
    out.rows("sends", ("broker", "send", "rtMs"), ((addr, i, round(rt, 3)) for i, rt in enumerate(rts)))


async def check_msg_send_rt(args: argparse.Namespace, out: Report) -> None:
    route = await _route(args, args.topic)
    columns = ("brokerName", "queueId", "sends", "avgRtMs", "maxRtMs")
    out.rows("queues", columns, title=f"send RT of {args.topic}")
    for q in route.queue_datas:
        addr = _master(route, q.broker_name)
        for qid in range(q.write_queue_nums):
            rts = await _timed_sends(addr, args.topic, qid, args.size, args.amount)
            out.rows("queues", columns, [(q.broker_name, qid, len(rts), round(sum(rts) / len(rts), 3),
                                          round(max(rts), 3))])


async def cluster_rt(args: argparse.Namespace, out: Report) -> None:
    info = await _cluster(args)
    columns = ("cluster", "brokerName", "sends", "avgRtMs", "maxRtMs")
    out.rows("brokers", columns, title="send RT per broker")
    for cluster, names in sorted(info.cluster_addr_table.items()):
        if args.cluster and cluster != args.cluster:
            continue
        for name in sorted(names):
            addr = info.broker_addr_table[name].broker_addrs.get(0)
            if addr:
                rts = await _timed_sends(addr, SELF_TEST_TOPIC, 0, args.size, args.amount)
                out.rows("brokers", columns, [(cluster, name, len(rts), round(sum(rts) / len(rts), 3),
                                               round(max(rts), 3))])


async def _each_namesrv(args: argparse.Namespace, code: RequestCode, fields: dict[str, str] | None = None,
                        body: bytes = b"", ok: tuple[int, ...] = (ResponseCode.SUCCESS,)
                        ) -> list[tuple[str, RemotingCommand]]:
    """The request sent to every name server (as mqadmin does for KV config and perms)."""
    return [(addr, await _invoke(addr, request(code, fields or {}, body), ok)) for addr in namesrv_addrs(args.namesrv)]


async def start_monitoring(args: argparse.Namespace, out: Report) -> None:
    """mqadmin startMonitoring: every -i seconds, each subscription group's lag per broker
    (GET_BROKER_CONSUME_STATS), as its monitor service reports it; -r rounds (0: until
    interrupted). Each round prints when complete (a blank line apart; one JSON document
    each under --output json)."""
    columns = ("round", "time", "broker", "group", "diff")

    async def fill(report: Report, n: int) -> None:
        report.rows("monitor", columns)
        for addr in await _target_brokers(args):
            lag: dict[str, int] = {}
            for group, _, o in (await _broker_consume_stats(addr))[0]:
                lag[group] = lag.get(group, 0) + o["brokerOffset"] - o["consumerOffset"]
            report.rows("monitor", columns, ((n, _ms(int(time.time() * 1000)), addr, g, d)
                                             for g, d in sorted(lag.items())))

    await _rounds(out, args.interval, args.rounds, fill)


async def update_kv_config(args: argparse.Namespace, out: Report) -> None:
    for addr, _ in await _each_namesrv(args, RequestCode.PUT_KV_CONFIG,
                                       {"namespace": args.namespace, "key": args.key, "value": args.value}):
        out.say(f"create or update kv config to namespace {addr} success.", namesrv=addr,
                namespace=args.namespace, key=args.key)


async def delete_kv_config(args: argparse.Namespace, out: Report) -> None:
    for addr, _ in await _each_namesrv(args, RequestCode.DELETE_KV_CONFIG,
                                       {"namespace": args.namespace, "key": args.key}):
        out.say(f"delete kv config from namespace {addr} success.", namesrv=addr, namespace=args.namespace,
                key=args.key)


async def update_order_conf(args: argparse.Namespace, out: Report) -> None:
    """The topic's ordered-queue layout in the ORDER_TOPIC_CONFIG namespace (-m put|get|delete)."""
    fields = {"namespace": ORDER_TOPIC_CONFIG, "key": args.topic}
    if args.method == "put":
        if not args.order_conf:
            raise AdminError("updateOrderConf -m put needs -v, e.g. broker-a:4;broker-b:4")
        for addr, _ in await _each_namesrv(args, RequestCode.PUT_KV_CONFIG, {**fields, "value": args.order_conf}):
            out.say(f"update orderConf success. topic=[{args.topic}], orderConf=[{args.order_conf}] ({addr})",
                    namesrv=addr, topic=args.topic, orderConf=args.order_conf)
    elif args.method == "delete":
        for addr, _ in await _each_namesrv(args, RequestCode.DELETE_KV_CONFIG, fields):
            out.say(f"delete orderConf success. topic=[{args.topic}] ({addr})", namesrv=addr, topic=args.topic)
    else:
        got = await _each_namesrv(args, RequestCode.GET_KV_CONFIG, fields,
                                  ok=(ResponseCode.SUCCESS, ResponseCode.QUERY_NOT_FOUND))
        out.rows("orderConf", ("namesrv", "topic", "orderConf"),
                 ((addr, args.topic, resp.ext_fields.get("value") if resp.code == ResponseCode.SUCCESS else None)
                  for addr, resp in got))


async def get_namesrv_config(args: argparse.Namespace, out: Report) -> None:
    out.rows("config", ("namesrv", "key", "value"), title="name server config")
    for addr, resp in await _each_namesrv(args, RequestCode.GET_NAMESRV_CONFIG):
        out.rows("config", ("namesrv", "key", "value"),
                 ((addr, *line.partition("=")[::2]) for line in sorted(bytes(resp.body).decode().splitlines())))


async def update_namesrv_config(args: argparse.Namespace, out: Report) -> None:
    for addr, _ in await _each_namesrv(args, RequestCode.UPDATE_NAMESRV_CONFIG,
                                       body=f"{args.key}={args.value}\n".encode()):
        out.say(f"update name server config success! {addr}", namesrv=addr, key=args.key, value=args.value)


async def wipe_write_perm(args: argparse.Namespace, out: Report) -> None:
    for addr, resp in await _each_namesrv(args, RequestCode.WIPE_WRITE_PERM_OF_BROKER,
                                          {"brokerName": args.broker_name}):
        count = _int(resp.ext_fields.get("wipeTopicCount"))
        out.say(f"wipe write perm of broker[{args.broker_name}] in name server[{addr}] OK, {count}",
                namesrv=addr, brokerName=args.broker_name, wipeTopicCount=count)


async def add_write_perm(args: argparse.Namespace, out: Report) -> None:
    for addr, resp in await _each_namesrv(args, RequestCode.ADD_WRITE_PERM_OF_BROKER,
                                          {"brokerName": args.broker_name}):
        count = _int(resp.ext_fields.get("addTopicCount"))
        out.say(f"add write perm of broker[{args.broker_name}] in name server[{addr}] OK, {count}",
                namesrv=addr, brokerName=args.broker_name, addTopicCount=count)


# ------------------------------------------------------------------ parser
Verb = Callable[[argparse.Namespace, Report], Awaitable[None]]


def _flag(value: str) -> bool:
    return value.lower() == "true"


def add_parser(sub: argparse._SubParsersAction) -> None:
    admin = sub.add_parser("admin", help="mqadmin-style administration over the remoting protocol")
    verbs = admin.add_subparsers(dest="verb", required=True)

    def verb(name: str, fn: Verb, help_text: str) -> argparse.ArgumentParser:
        p = verbs.add_parser(name, help=help_text)
        p.add_argument("-n", "--namesrv", help=f"name server host:port[;host:port...] "
                       f"(default: ${NAMESRV_ENV}, else {DEFAULT_NAMESRV})")
        p.add_argument("--output", choices=OUTPUT_FORMATS,
                       help="table, json (one document) or plain (tab-separated, with a header "
                            "line); default: table at a terminal, plain otherwise")
        p.add_argument("--tls", action="store_true", help="TLS to the name servers and brokers "
                       "(tls.server.mode permissive or enforcing)")
        p.add_argument("--tls-ca", metavar="PEM", help="the CA that signed the broker's certificate (implies --tls)")
        p.add_argument("--tls-cert", metavar="PEM", help="a client certificate, for mutual TLS")
        p.add_argument("--tls-key", metavar="PEM", help="its private key")
        p.set_defaults(admin=fn)
        return p

    def target(p: argparse.ArgumentParser) -> None:
        p.add_argument("-b", "--broker", help="broker address host:port")
        p.add_argument("-c", "--cluster", help="cluster name")

    p = verb("updateTopic", update_topic, "create or update a topic")
    p.add_argument("-t", "--topic", required=True)
    p.add_argument("-r", "--read-queue-nums", type=int, default=8)
    p.add_argument("-w", "--write-queue-nums", type=int, default=8)
    p.add_argument("-p", "--perm", type=int, default=6)
    p.add_argument("-o", "--order", type=_flag, default=False)
    target(p)
    p = verb("deleteTopic", delete_topic, "delete a topic from brokers")
    p.add_argument("-t", "--topic", required=True)
    target(p)
    verb("topicList", topic_list, "list topics the name server knows").add_argument(
        "-c", "--clusters", action="store_true", help="with each topic's cluster and consumer groups")
    verb("topicRoute", topic_route, "print a topic's route (JSON)").add_argument("-t", "--topic", required=True)
    verb("topicStatus", topic_status, "min/max offset per queue").add_argument("-t", "--topic", required=True)
    p = verb("clusterList", cluster_list, "brokers per cluster with their rates and counters")
    p.add_argument("-m", "--more", action="store_true", help="yesterday's and today's produce and consume counts")
    p.add_argument("-i", "--interval", type=float, help="print again every this many seconds")
    p.add_argument("-r", "--rounds", type=int, default=0, help="with -i: rounds to print (0: until interrupted)")
    target(verb("brokerStatus", broker_status, "a broker's runtime info"))
    target(verb("getBrokerConfig", get_broker_config, "a broker's settings"))
    target(verb("amqpExchanges", amqp_exchanges, "AMQP exchanges, with exchange-to-exchange bindings"))
    target(verb("amqpQueues", amqp_queues, "AMQP queues: bindings, consumers, messages ready"))
    p = verb("updateSubGroup", update_sub_group, "create or update a subscription group")
    p.add_argument("-g", "--group", required=True)
    # mqadmin's flags and SubscriptionGroupConfig's defaults (-q is retryQueueNums there)
    p.add_argument("-d", "--broadcast", type=_flag, default=True, help="consumeBroadcastEnable")
    p.add_argument("-q", "--retry-queue-nums", type=int, default=1, help="retryQueueNums")
    p.add_argument("-r", "--retry-max-times", type=int, default=16, help="retryMaxTimes")
    p.add_argument("-s", "--consume-enable", type=_flag, default=True, help="consumeEnable")
    p.add_argument("-m", "--consume-from-min", type=_flag, default=True, help="consumeFromMinEnable")
    p.add_argument("-i", "--broker-id", type=int, default=0, help="brokerId to consume from")
    p.add_argument("-w", "--which-broker-when-consume-slowly", type=int, default=1,
                   help="whichBrokerWhenConsumeSlowly")
    p.add_argument("-a", "--notify-consumer-ids-changed", type=_flag, default=True,
                   help="notifyConsumerIdsChangedEnable")
    target(p)
    p = verb("deleteSubGroup", delete_sub_group, "delete a subscription group and its offsets")
    p.add_argument("-g", "--group", required=True)
    target(p)
    p = verb("consumerProgress", consumer_progress, "a group's lag per queue")
    p.add_argument("-g", "--group", required=True)
    p.add_argument("-t", "--topic")
    p.add_argument("-s", "--show-client-ip", nargs="?", const=True, default=False, type=_flag,
                   help="each queue's client IP (asks each client through the broker, 307)")
    target(p)
    p = verb("consumerStatus", consumer_status, "a group's clients as they run: queues, subscriptions (307)")
    p.add_argument("-g", "--group", required=True)
    p.add_argument("-i", "--client-id", help="one client in detail")
    p.add_argument("-s", "--jstack", action="store_true", help="with the client's task stacks")
    p.add_argument("-b", "--broker", help="broker address host:port to ask")
    verb("queryMsgById", query_msg_by_id, "view a message by offset message id").add_argument(
        "-i", "--msg-id", required=True)
    p = verb("queryMsgByKey", query_msg_by_key, "messages by key")
    p.add_argument("-t", "--topic", required=True)
    p.add_argument("-k", "--key", required=True)
    p = verb("queryMsgByOffset", query_msg_by_offset, "a message by queue offset")
    p.add_argument("-t", "--topic", required=True)
    p.add_argument("-b", "--broker-name", required=True)
    p.add_argument("-i", "--queue-id", type=int, required=True)
    p.add_argument("-o", "--offset", type=int, required=True)
    p = verb("sendMessage", send_message, "send one message")
    p.add_argument("-t", "--topic", required=True)
    p.add_argument("-p", "--body", required=True)
    p.add_argument("-k", "--keys")
    p.add_argument("-c", "--tags")
    p.add_argument("-b", "--broker-name")
    p.add_argument("-i", "--queue-id", type=int)
    p = verb("consumeMessage", consume_message, "print messages from each queue's start")
    p.add_argument("-t", "--topic", required=True)
    p.add_argument("-g", "--group", default="TOOLS_CONSUMER")
    p.add_argument("-c", "--count", type=int, default=16)
    p.add_argument("-b", "--broker-name", help="only this broker's queues")
    p.add_argument("-i", "--queue-id", type=int, help="only this queue")
    p.add_argument("-o", "--offset", type=int, help="start at this queue offset")
    p.add_argument("-s", "--begin", help="start at this store time (ms or yyyy-MM-dd#HH:mm:ss:SSS)")
    p.add_argument("-e", "--end", help="no message stored after this time")
    p = verb("printMsg", print_msg, "print messages stored in a time range")
    p.add_argument("-t", "--topic", required=True)
    p.add_argument("-b", "--begin", help="begin timestamp (ms or yyyy-MM-dd#HH:mm:ss:SSS)")
    p.add_argument("-e", "--end", help="end timestamp")
    p.add_argument("-l", "--limit", type=int, default=256)
    p.add_argument("-s", "--sub-expression", default="*", help="tags: TagA || TagB, or *")
    p.add_argument("-d", "--print-body", type=_flag, default=True, help="false: no bodies")
    p.add_argument("-c", "--charset", default="utf-8", help="the bodies' character set")
    p = verb("resetOffsetByTime", reset_offset_by_time, "commit a group's offsets at a time")
    p.add_argument("-g", "--group", required=True)
    p.add_argument("-t", "--topic", required=True)
    p.add_argument("-s", "--timestamp", required=True, help="ms, yyyy-MM-dd#HH:mm:ss:SSS or now")
    p.add_argument("-f", "--force", type=_flag, default=True,
                   help="false: a queue whose committed offset is already before the time keeps it")
    p.add_argument("-c", "--cplus", action="store_true",
                   help="mqadmin's flag for C++ clients; the broker pushes the reset to every client alike")
    p = verb("cloneGroupOffset", clone_group_offset, "copy a group's offsets to another group")
    p.add_argument("-s", "--src-group", required=True)
    p.add_argument("-d", "--dest-group", required=True)
    p.add_argument("-t", "--topic", required=True)
    p = verb("consumerConnection", consumer_connection, "a group's online consumers")
    p.add_argument("-g", "--group", required=True)
    target(p)
    p = verb("producerConnection", producer_connection, "a group's online producers")
    p.add_argument("-g", "--group", required=True)
    p.add_argument("-t", "--topic")
    target(p)
    p = verb("updateBrokerConfig", update_broker_config, "change a broker setting while it runs (persisted)")
    p.add_argument("-k", "--key", required=True)
    p.add_argument("-v", "--value", required=True)
    target(p)
    target(verb("cleanExpiredCQ", clean_expired_cq, "delete ConsumeQueue files the CommitLog no longer backs"))
    target(verb("cleanUnusedTopic", clean_unused_topic, "delete ConsumeQueues of topics with no config"))
    target(verb("deleteExpiredCommitLog", delete_expired_commit_log,
                "delete CommitLog segments past fileReservedTime now"))
    p = verb("statsAll", stats_all, "topic and consumer group TPS and 24-hour counts")
    p.add_argument("-a", "--active", action="store_true", help="active topics only (messages in 24 hours)")
    p.add_argument("-t", "--topic", help="this topic only")
    p = verb("brokerConsumeStats", broker_consume_stats, "every group's lag per queue on a broker")
    p.add_argument("-l", "--diff-level", type=int, default=0, help="only queues lagging at least this much")
    p.add_argument("-o", "--order", type=_flag, default=False, help="isOrder")
    target(p)
    p = verb("printMsgByQueue", print_msg_by_queue, "print one queue's messages in a time range")
    p.add_argument("-t", "--topic", required=True)
    p.add_argument("-a", "--broker-name", required=True)
    p.add_argument("-i", "--queue-id", type=int, required=True)
    p.add_argument("-b", "--begin", help="begin timestamp (ms or yyyy-MM-dd#HH:mm:ss:SSS)")
    p.add_argument("-e", "--end", help="end timestamp")
    p.add_argument("-l", "--limit", type=int, default=256)
    p = verb("queryMsgByUniqueKey", query_msg_by_unique_key, "a message by its unique key (client msgId)")
    p.add_argument("-i", "--msg-id", required=True)
    p.add_argument("-t", "--topic", required=True)
    p.add_argument("-g", "--group", help="with -d: that consumer of this group consumes the message (309)")
    p.add_argument("-d", "--client-id", help="with -g: the consumer's client id")
    verb("topicClusterList", topic_cluster_list, "clusters a topic is served in").add_argument(
        "-t", "--topic", required=True)
    p = verb("updateTopicPerm", update_topic_perm, "change a topic's permission (2 write, 4 read, 6 both)")
    p.add_argument("-t", "--topic", required=True)
    p.add_argument("-p", "--perm", type=int, required=True)
    p.add_argument("-b", "--broker-name", help="only this broker's queues")
    p.add_argument("-c", "--cluster", help="only brokers of this cluster")
    p = verb("allocateMQ", allocate_mq, "how average allocation spreads a topic's queues over clients")
    p.add_argument("-t", "--topic", required=True)
    p.add_argument("-i", "--ip-list", required=True, help="client ids, comma-separated")
    p = verb("sendMsgStatus", send_msg_status, "send messages to one broker and print each round trip")
    p.add_argument("-b", "--broker-name", required=True)
    p.add_argument("-s", "--message-size", type=int, default=128)
    p.add_argument("-c", "--count", type=int, default=50)
    p = verb("checkMsgSendRT", check_msg_send_rt, "average send round trip per queue of a topic")
    p.add_argument("-t", "--topic", required=True)
    p.add_argument("-a", "--amount", type=int, default=100)
    p.add_argument("-s", "--size", type=int, default=128)
    p = verb("clusterRT", cluster_rt, "send round trip of every broker (to SELF_TEST_TOPIC)")
    p.add_argument("-a", "--amount", type=int, default=100)
    p.add_argument("-s", "--size", type=int, default=128)
    p.add_argument("-c", "--cluster")
    p = verb("updateKvConfig", update_kv_config, "set a name server KV config item")
    p.add_argument("-s", "--namespace", required=True)
    p.add_argument("-k", "--key", required=True)
    p.add_argument("-v", "--value", required=True)
    p = verb("deleteKvConfig", delete_kv_config, "delete a name server KV config item")
    p.add_argument("-s", "--namespace", required=True)
    p.add_argument("-k", "--key", required=True)
    p = verb("updateOrderConf", update_order_conf, "a topic's ordered-queue layout at the name servers")
    p.add_argument("-t", "--topic", required=True)
    p.add_argument("-v", "--order-conf", help="brokerName:queueNums;... (with -m put)")
    p.add_argument("-m", "--method", choices=("put", "get", "delete"), default="get")
    verb("getNamesrvConfig", get_namesrv_config, "every name server's settings")
    p = verb("updateNamesrvConfig", update_namesrv_config, "change a name server setting live")
    p.add_argument("-k", "--key", required=True)
    p.add_argument("-v", "--value", required=True)
    verb("wipeWritePerm", wipe_write_perm, "make a broker's queues read-only in every name server's routes"
         ).add_argument("-b", "--broker-name", required=True)
    p = verb("startMonitoring", start_monitoring, "print every group's lag at an interval")
    p.add_argument("-i", "--interval", type=float, default=20.0, help="seconds between rounds (20)")
    p.add_argument("-r", "--rounds", type=int, default=0, help="rounds to run (0: until interrupted)")
    target(p)
    verb("addWritePerm", add_write_perm, "undo wipeWritePerm for a broker").add_argument(
        "-b", "--broker-name", required=True)
    for name, fn, text in (("updateScramCredential", update_scram_credential,
                            "set a Kafka SASL/SCRAM credential (salted, hashed) in the credential file"),
                           ("deleteScramCredential", delete_scram_credential,
                            "remove a Kafka SASL/SCRAM credential")):
        p = verb(name, fn, text)
        p.add_argument("-u", "--user", required=True)
        p.add_argument("-m", "--mechanism", choices=("SCRAM-SHA-256", "SCRAM-SHA-512"), default="SCRAM-SHA-256")
        p.add_argument("-f", "--file", required=True,
                       help="the broker's kafkaScramCredentialFile (default <storePathRootDir>/config/scram_credentials.json)")
        if fn is update_scram_credential:
            p.add_argument("-i", "--iterations", type=int, default=4096)


async def _run_verb(args: argparse.Namespace, out: Report) -> None:
    async with AdminClient(";".join(namesrv_addrs(args.namesrv)), timeout_s=10.0,
                           credentials=_credentials(), tls=_tls(args)) as client:
        _CLIENT.set(client)
        await args.admin(args, out)


def run(args: argparse.Namespace, console: Console | None = None, errors: Console | None = None) -> int:
    """Run the chosen verb; results on ``console`` (stdout), failures and remarks on
    ``errors`` (stderr), so a pipe reading stdout gets results only."""
    console = console or Console()
    errors = errors or Console(stderr=True)
    out = Report(output_format(getattr(args, "output", None), console), console, errors)
    try:
        asyncio.run(_run_verb(args, out))
    except AdminError as exc:
        errors.print(str(exc), style="red", markup=False, highlight=False, soft_wrap=True)
        return 1
    out.emit()
    return 0
