"""`rocketport admin`: mqadmin's verbs and flags over the remoting protocol.

Talks to a name server (-n, else the NAMESRV_ADDR environment variable, as mqadmin) to find
brokers, then to brokers, exactly as mqadmin does, so it works against Rocketport or against
Apache RocketMQ. Results print as rich tables.
It only sends requests a real broker answers the same way; it never reads a store. For a
broker with aclEnable, ROCKETPORT_ACCESS_KEY / ROCKETPORT_SECRET_KEY sign every request.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import os
import time
from collections.abc import Awaitable, Callable

import orjson
from rich.console import Console
from rich.table import Table

from rocketport.core.message import MessageExt, encode_properties
from rocketport.protocols.remoting import RemotingCommand
from rocketport.protocols.remoting import bodies, mq_tables
from rocketport.protocols.remoting.client import RemotingClient, request
from rocketport.protocols.remoting.codes import RequestCode, ResponseCode
from rocketport.protocols.remoting.headers import CloneGroupOffsetRequestHeader, SendMessageRequestHeader, encode_header
from rocketport.protocols.remoting.messages import (
    MessageClientIdGenerator,
    decode_message_ext_records,
    decode_offset_msg_id,
)


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


async def _invoke(addr: str, cmd: RemotingCommand, ok: tuple[int, ...] = (ResponseCode.SUCCESS,)) -> RemotingCommand:
    try:
        async with await RemotingClient.connect(addr, credentials=_credentials()) as client:
            resp = await client.invoke(cmd)
    except (OSError, asyncio.TimeoutError) as exc:
        raise _Unreachable(f"cannot reach {addr}: {exc}") from None
    if resp.code not in ok:
        raise AdminError(f"{addr} answered code {resp.code}: {resp.remark or ''}")
    return resp


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


def _message_table(messages: list[MessageExt], title: str) -> Table:
    table = Table(title=title)
    for col in ("topic", "queue", "offset", "tags", "keys", "born", "stored", "body"):
        table.add_column(col)
    for m in messages:
        body = m.body[:80].decode("utf-8", "replace")
        table.add_row(m.topic, str(m.queue_id), str(m.queue_offset), m.tags or "", " ".join(m.keys),
                      _ms(m.born_timestamp), _ms(m.store_timestamp), body)
    return table


# ------------------------------------------------------------------ verbs
async def update_topic(args: argparse.Namespace, console: Console) -> None:
    fields = {"topic": args.topic, "defaultTopic": "TBW102", "readQueueNums": str(args.read_queue_nums),
              "writeQueueNums": str(args.write_queue_nums), "perm": str(args.perm),
              "topicFilterType": "SINGLE_TAG", "topicSysFlag": "0", "order": str(args.order).lower()}
    for addr in await _target_brokers(args):
        await _invoke(addr, request(RequestCode.UPDATE_AND_CREATE_TOPIC, fields))
        console.print(f"create topic to {addr} success.")


async def delete_topic(args: argparse.Namespace, console: Console) -> None:
    for addr in await _target_brokers(args):
        await _invoke(addr, request(RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": args.topic}))
        console.print(f"delete topic [{args.topic}] from {addr} success.")


async def topic_list(args: argparse.Namespace, console: Console) -> None:
    resp = await _ask_namesrv(args, lambda: request(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER))
    for topic in bodies.decode_body(bodies.TopicList, resp.body).topic_list:
        console.print(topic, highlight=False)


async def topic_route(args: argparse.Namespace, console: Console) -> None:
    route = await _route(args, args.topic)
    console.print_json(orjson.dumps(bodies.body_to_json_obj(route)).decode())


async def topic_status(args: argparse.Namespace, console: Console) -> None:
    route = await _route(args, args.topic)
    table = Table(title=f"topic {args.topic}")
    for col in ("broker", "queue", "min offset", "max offset", "last updated"):
        table.add_column(col)
    for q in route.queue_datas:
        resp = await _invoke(_master(route, q.broker_name),
                             request(RequestCode.GET_TOPIC_STATS_INFO, {"topic": args.topic}))
        stats = mq_tables.loads(resp.body).get("offsetTable", {})
        for mq, offsets in sorted(stats.items()):
            table.add_row(mq.broker_name, str(mq.queue_id), str(offsets["minOffset"]),
                          str(offsets["maxOffset"]), _ms(offsets.get("lastUpdateTimestamp", 0)))
    console.print(table)


async def _runtime(addr: str) -> dict[str, str]:
    resp = await _invoke(addr, request(RequestCode.GET_BROKER_RUNTIME_INFO))
    return bodies.decode_body(bodies.KVTable, resp.body).table


async def cluster_list(args: argparse.Namespace, console: Console) -> None:
    info = await _cluster(args)
    table = Table(title="clusters")
    for col in ("cluster", "broker", "id", "address", "put total", "get total", "topics"):
        table.add_column(col)
    for cluster, names in sorted(info.cluster_addr_table.items()):
        for name in sorted(names):
            for broker_id, addr in sorted(info.broker_addr_table[name].broker_addrs.items()):
                try:
                    rt = await _runtime(addr)
                except AdminError:
                    rt = {}
                table.add_row(cluster, name, str(broker_id), addr, rt.get("msgPutTotalTodayNow", "?"),
                              rt.get("msgGetTotalTodayNow", "?"), rt.get("topicCount", "?"))
    console.print(table)


async def broker_status(args: argparse.Namespace, console: Console) -> None:
    for addr in await _target_brokers(args):
        table = Table(title=f"broker {addr}")
        table.add_column("key")
        table.add_column("value")
        for key, value in sorted((await _runtime(addr)).items()):
            table.add_row(key, value)
        console.print(table)


async def get_broker_config(args: argparse.Namespace, console: Console) -> None:
    for addr in await _target_brokers(args):
        body = bytes((await _invoke(addr, request(RequestCode.GET_BROKER_CONFIG))).body).decode("utf-8")
        table = Table(title=f"broker {addr} config")
        table.add_column("key")
        table.add_column("value")
        for line in sorted(body.splitlines()):
            key, _, value = line.partition("=")
            table.add_row(key, value)
        console.print(table)


async def update_sub_group(args: argparse.Namespace, console: Console) -> None:
    body = orjson.dumps({"groupName": args.group, "consumeEnable": True,
                         "consumeBroadcastEnable": args.broadcast, "retryQueueNums": 1,
                         "retryMaxTimes": args.retry_max_times, "brokerId": 0,
                         "whichBrokerWhenConsumeSlowly": 1, "notifyConsumerIdsChangedEnable": True})
    for addr in await _target_brokers(args):
        await _invoke(addr, request(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=body))
        console.print(f"create subscription group to {addr} success.")


async def delete_sub_group(args: argparse.Namespace, console: Console) -> None:
    for addr in await _target_brokers(args):
        await _invoke(addr, request(RequestCode.DELETE_SUBSCRIPTIONGROUP, {"groupName": args.group}))
        console.print(f"delete subscription group [{args.group}] from {addr} success.")


async def consumer_progress(args: argparse.Namespace, console: Console) -> None:
    topics = [args.topic] if args.topic else []
    if not topics:  # the group's subscriptions, from a broker that has it online
        for addr in await _target_brokers(args):
            resp = await _invoke(addr, request(RequestCode.GET_CONSUMER_CONNECTION_LIST,
                                               {"consumerGroup": args.group}),
                                 (ResponseCode.SUCCESS, ResponseCode.CONSUMER_NOT_ONLINE))
            if resp.code == ResponseCode.SUCCESS:
                topics = sorted(orjson.loads(bytes(resp.body)).get("subscriptionTable", {}))
                break
        if not topics:
            raise AdminError(f"group {args.group} is not online; give -t topic")
    table = Table(title=f"consumer progress of {args.group}")
    for col in ("topic", "broker", "queue", "broker offset", "consumer offset", "diff"):
        table.add_column(col)
    total = 0
    for topic in topics:
        route = await _route(args, topic)
        for q in route.queue_datas:
            resp = await _invoke(_master(route, q.broker_name), request(
                RequestCode.GET_CONSUME_STATS, {"consumerGroup": args.group, "topic": topic}))
            for mq, o in sorted(mq_tables.loads(resp.body).get("offsetTable", {}).items()):
                hi, done = o["brokerOffset"], o["consumerOffset"]
                total += hi - done
                table.add_row(mq.topic, mq.broker_name, str(mq.queue_id), str(hi), str(done),
                              str(hi - done))
    console.print(table)
    console.print(f"Diff Total: {total}")


async def query_msg_by_id(args: argparse.Namespace, console: Console) -> None:
    try:
        ip, port, offset = decode_offset_msg_id(args.msg_id)
    except ValueError as exc:
        raise AdminError(str(exc)) from None
    resp = await _invoke(f"{ip}:{port}", request(RequestCode.VIEW_MESSAGE_BY_ID, {"offset": str(offset)}))
    _print_message(console, decode_message_ext_records(resp.body)[0])


def _print_message(console: Console, m: MessageExt) -> None:
    table = Table(show_header=False)
    rows = [("Topic", m.topic), ("Tags", m.tags or ""), ("Keys", " ".join(m.keys)),
            ("Queue ID", str(m.queue_id)), ("Queue Offset", str(m.queue_offset)),
            ("CommitLog Offset", str(m.commit_log_offset)), ("Reconsume Times", str(m.reconsume_times)),
            ("Born Timestamp", _ms(m.born_timestamp)), ("Store Timestamp", _ms(m.store_timestamp)),
            ("Born Host", "%s:%d" % m.born_host), ("Store Host", "%s:%d" % m.store_host),
            ("Properties", str(m.properties)), ("Body", m.body.decode("utf-8", "replace"))]
    for key, value in rows:
        table.add_row(key, value)
    console.print(table)


async def query_msg_by_key(args: argparse.Namespace, console: Console) -> None:
    route = await _route(args, args.topic)
    found: list[MessageExt] = []
    for data in route.broker_datas:
        addr = data.broker_addrs.get(0)
        if addr:
            resp = await _invoke(addr, request(RequestCode.QUERY_MESSAGE, {
                "topic": args.topic, "key": args.key, "maxNum": "64", "beginTimestamp": "0",
                "endTimestamp": str(int(time.time() * 1000) + 60_000)}),
                (ResponseCode.SUCCESS, ResponseCode.QUERY_NOT_FOUND))
            if resp.code == ResponseCode.SUCCESS:
                found += decode_message_ext_records(resp.body)
    console.print(_message_table(found, f"key {args.key} in {args.topic}"))


async def _pull(addr: str, topic: str, queue_id: int, offset: int, count: int, group: str) -> RemotingCommand:
    return await _invoke(addr, request(RequestCode.PULL_MESSAGE, {
        "consumerGroup": group, "topic": topic, "queueId": str(queue_id), "queueOffset": str(offset),
        "maxMsgNums": str(count), "sysFlag": "0", "commitOffset": "0", "suspendTimeoutMillis": "0",
        "subscription": "*", "subVersion": "0"}),
        (ResponseCode.SUCCESS, ResponseCode.PULL_NOT_FOUND, ResponseCode.PULL_OFFSET_MOVED,
         ResponseCode.PULL_RETRY_IMMEDIATELY))


async def query_msg_by_offset(args: argparse.Namespace, console: Console) -> None:
    route = await _route(args, args.topic)
    resp = await _pull(_master(route, args.broker_name), args.topic, args.queue_id, args.offset, 1,
                       "TOOLS_CONSUMER")
    if resp.code != ResponseCode.SUCCESS:
        raise AdminError(f"no message at offset {args.offset} (code {resp.code})")
    _print_message(console, decode_message_ext_records(resp.body)[0])


async def send_message(args: argparse.Namespace, console: Console) -> None:
    route = await _route(args, args.topic)
    queue = route.queue_datas[0]
    addr = _master(route, args.broker_name or queue.broker_name)
    properties = {"UNIQ_KEY": MessageClientIdGenerator().next_id(), "WAIT": "true"}
    if args.tags:
        properties["TAGS"] = args.tags
    if args.keys:
        properties["KEYS"] = args.keys
    header = SendMessageRequestHeader(
        "TOOLS_PRODUCER", args.topic, "TBW102", 4, args.queue_id if args.queue_id is not None else 0,
        0, int(time.time() * 1000), 0, encode_properties(properties).decode())
    resp = await _invoke(addr, request(RequestCode.SEND_MESSAGE, encode_header(header),
                                       args.body.encode()))
    table = Table()
    for col in ("broker", "queue", "offset", "msgId", "offsetMsgId", "status"):
        table.add_column(col)
    table.add_row(addr, resp.ext_fields.get("queueId", ""), resp.ext_fields.get("queueOffset", ""),
                  properties["UNIQ_KEY"], resp.ext_fields.get("msgId", ""), "SEND_OK")
    console.print(table)


async def consume_message(args: argparse.Namespace, console: Console) -> None:
    route = await _route(args, args.topic)
    messages: list[MessageExt] = []
    for q in route.queue_datas:
        addr = _master(route, q.broker_name)
        for qid in range(q.read_queue_nums):
            if len(messages) >= args.count:
                break
            f = {"topic": args.topic, "queueId": str(qid)}
            offset = int((await _invoke(addr, request(RequestCode.GET_MIN_OFFSET, f))).ext_fields["offset"])
            resp = await _pull(addr, args.topic, qid, offset, args.count - len(messages), args.group)
            if resp.code == ResponseCode.SUCCESS:
                messages += decode_message_ext_records(resp.body)
    console.print(_message_table(messages, f"{len(messages)} message(s) of {args.topic}"))


async def consumer_connection(args: argparse.Namespace, console: Console) -> None:
    for addr in await _target_brokers(args):
        resp = await _invoke(addr, request(RequestCode.GET_CONSUMER_CONNECTION_LIST,
                                           {"consumerGroup": args.group}),
                             (ResponseCode.SUCCESS, ResponseCode.CONSUMER_NOT_ONLINE))
        if resp.code != ResponseCode.SUCCESS:
            console.print(f"{addr}: group {args.group} not online")
            continue
        info = orjson.loads(bytes(resp.body))
        table = Table(title=f"{args.group} on {addr} ({info.get('messageModel')}, "
                            f"{info.get('consumeFromWhere')})")
        for col in ("client id", "address", "language"):
            table.add_column(col)
        for c in info.get("connectionSet", []):
            table.add_row(c.get("clientId", ""), c.get("clientAddr", ""), str(c.get("language", "")))
        console.print(table)
        subs = Table(title="subscriptions")
        for col in ("topic", "expression", "type"):
            subs.add_column(col)
        for topic, sub in sorted(info.get("subscriptionTable", {}).items()):
            subs.add_row(topic, sub.get("subString", ""), sub.get("expressionType", ""))
        console.print(subs)


async def producer_connection(args: argparse.Namespace, console: Console) -> None:
    table = Table(title=f"producers of {args.group}")
    table.add_column("broker")
    table.add_column("client id")
    for addr in await _target_brokers(args):
        resp = await _invoke(addr, request(RequestCode.GET_PRODUCER_CONNECTION_LIST,
                                           {"producerGroup": args.group}))
        for c in orjson.loads(bytes(resp.body)).get("connectionSet", []):
            table.add_row(addr, c.get("clientId", ""))
    console.print(table)


def _timestamp(text: str) -> int:
    """mqadmin accepts ms since the epoch or yyyy-MM-dd#HH:mm:ss:SSS; "now" is allowed too."""
    if text == "now":
        return int(time.time() * 1000)
    if text.isdigit():
        return int(text)
    return int(datetime.datetime.strptime(text, "%Y-%m-%d#%H:%M:%S:%f").timestamp() * 1000)


async def reset_offset_by_time(args: argparse.Namespace, console: Console) -> None:
    table = Table(title=f"{args.group} reset on {args.topic}")
    for col in ("broker", "queue", "new offset"):
        table.add_column(col)
    route = await _route(args, args.topic)
    for data in route.broker_datas:
        addr = data.broker_addrs.get(0)
        if not addr:
            continue
        resp = await _invoke(addr, request(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, {
            "topic": args.topic, "group": args.group, "timestamp": str(_timestamp(args.timestamp)),
            "isForce": "true"}))
        for mq, offset in sorted(mq_tables.loads(resp.body).get("offsetTable", {}).items()):
            table.add_row(mq.broker_name, str(mq.queue_id), str(offset))
    console.print(table)


async def clone_group_offset(args: argparse.Namespace, console: Console) -> None:
    route = await _route(args, args.topic)
    for name in sorted({q.broker_name for q in route.queue_datas}):  # CLONE_GROUP_OFFSET per broker, as mqadmin
        await _invoke(_master(route, name), request(RequestCode.CLONE_GROUP_OFFSET, encode_header(
            CloneGroupOffsetRequestHeader(args.src_group, args.dest_group, args.topic))))
    console.print(f"clone group offset success. srcGroup[{args.src_group}], "
                  f"destGroup[{args.dest_group}], topic[{args.topic}]")


async def print_msg(args: argparse.Namespace, console: Console) -> None:
    route = await _route(args, args.topic)
    messages: list[MessageExt] = []
    for q in route.queue_datas:
        addr = _master(route, q.broker_name)
        for qid in range(q.read_queue_nums):
            f = {"topic": args.topic, "queueId": str(qid)}
            if args.begin:
                start = int((await _invoke(addr, request(RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, {
                    **f, "timestamp": str(_timestamp(args.begin))}))).ext_fields["offset"])
            else:
                start = int((await _invoke(addr, request(RequestCode.GET_MIN_OFFSET, f))).ext_fields["offset"])
            end_ms = _timestamp(args.end) if args.end else None
            while len(messages) < args.limit:
                resp = await _pull(addr, args.topic, qid, start, min(32, args.limit - len(messages)),
                                   "TOOLS_CONSUMER")
                if resp.code != ResponseCode.SUCCESS:
                    break
                batch = [m for m in decode_message_ext_records(resp.body)
                         if end_ms is None or m.store_timestamp <= end_ms]
                messages += batch
                start = int(resp.ext_fields["nextBeginOffset"])
                if not batch:
                    break
    console.print(_message_table(messages, f"{len(messages)} message(s) of {args.topic}"))


# ------------------------------------------------------------------ parser
Verb = Callable[[argparse.Namespace, Console], Awaitable[None]]


def add_parser(sub: argparse._SubParsersAction) -> None:
    admin = sub.add_parser("admin", help="mqadmin-style administration over the remoting protocol")
    verbs = admin.add_subparsers(dest="verb", required=True)

    def verb(name: str, fn: Verb, help_text: str) -> argparse.ArgumentParser:
        p = verbs.add_parser(name, help=help_text)
        p.add_argument("-n", "--namesrv", help=f"name server host:port[;host:port...] "
                       f"(default: ${NAMESRV_ENV}, else {DEFAULT_NAMESRV})")
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
    p.add_argument("-o", "--order", type=lambda v: v.lower() == "true", default=False)
    target(p)
    p = verb("deleteTopic", delete_topic, "delete a topic from brokers")
    p.add_argument("-t", "--topic", required=True)
    target(p)
    verb("topicList", topic_list, "list topics the name server knows")
    verb("topicRoute", topic_route, "print a topic's route").add_argument("-t", "--topic", required=True)
    verb("topicStatus", topic_status, "min/max offset per queue").add_argument("-t", "--topic", required=True)
    verb("clusterList", cluster_list, "brokers per cluster with their counters")
    target(verb("brokerStatus", broker_status, "a broker's runtime info"))
    target(verb("getBrokerConfig", get_broker_config, "a broker's settings"))
    p = verb("updateSubGroup", update_sub_group, "create or update a subscription group")
    p.add_argument("-g", "--group", required=True)
    p.add_argument("-d", "--broadcast", type=lambda v: v.lower() == "true", default=True)
    p.add_argument("-q", "--retry-max-times", type=int, default=16)
    target(p)
    p = verb("deleteSubGroup", delete_sub_group, "delete a subscription group and its offsets")
    p.add_argument("-g", "--group", required=True)
    target(p)
    p = verb("consumerProgress", consumer_progress, "a group's lag per queue")
    p.add_argument("-g", "--group", required=True)
    p.add_argument("-t", "--topic")
    target(p)
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
    p = verb("printMsg", print_msg, "print messages stored in a time range")
    p.add_argument("-t", "--topic", required=True)
    p.add_argument("-b", "--begin", help="begin timestamp (ms or yyyy-MM-dd#HH:mm:ss:SSS)")
    p.add_argument("-e", "--end", help="end timestamp")
    p.add_argument("-l", "--limit", type=int, default=256)
    p = verb("resetOffsetByTime", reset_offset_by_time, "commit a group's offsets at a time")
    p.add_argument("-g", "--group", required=True)
    p.add_argument("-t", "--topic", required=True)
    p.add_argument("-s", "--timestamp", required=True, help="ms, yyyy-MM-dd#HH:mm:ss:SSS or now")
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


def run(args: argparse.Namespace, console: Console | None = None) -> int:
    console = console or Console()
    try:
        asyncio.run(args.admin(args, console))
    except AdminError as exc:
        console.print(f"[red]{exc}[/red]")
        return 1
    return 0
