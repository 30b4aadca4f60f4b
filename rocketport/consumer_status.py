"""What `rocketport admin consumerStatus` prints from consumers' running info (307).

Turns ConsumerRunningInfo answers into rows: one summary row per client, the checks
mqadmin runs over them (the same subscription in every client; a queue that has not
consumed for a minute while holding messages; an orderly queue not locked), one client
in detail, and each queue's client address for consumerProgress -s. Pure functions: the
requests are the verbs' (admin.py).
"""

from __future__ import annotations

import datetime
from typing import Any

from rocketport.protocols.remoting.running_info import (
    PROP_CLIENT_VERSION,
    PROP_CONSUME_ORDERLY,
    PROP_CONSUME_TYPE,
    STATUS_FIELDS,
    ConsumerRunningInfo,
)

BLOCKED_AFTER_MS = 60_000  # mqadmin: a queue holding messages and not consumed for a minute

SUMMARY_COLUMNS = ("index", "clientId", "version", "consumeType", "orderly", "messageModel",
                   "subscriptions", "queues", "cachedMsgCount")
QUEUE_COLUMNS = ("topic", "brokerName", "queueId", "commitOffset", "cachedMsgMinOffset",
                 "cachedMsgMaxOffset", "cachedMsgCount", "locked", "dropped", "lastPullTimestamp",
                 "lastConsumeTimestamp")
SUBSCRIPTION_COLUMNS = ("topic", "expressionType", "subExpression")
STATUS_COLUMNS = ("topic", *STATUS_FIELDS)


def _time(ms: int) -> str:
    return datetime.datetime.fromtimestamp(ms / 1000).isoformat(sep=" ", timespec="milliseconds") if ms > 0 else "-"


def _subscriptions(info: ConsumerRunningInfo) -> frozenset[tuple[str, str, str]]:
    return frozenset((s.topic, s.expression_type, s.sub_string) for s in info.subscription_set)


def summary_row(index: int, client_id: str, info: ConsumerRunningInfo) -> tuple[Any, ...]:
    props = info.properties
    subs = ", ".join(f"{t}:{e}" for t, _, e in sorted(_subscriptions(info)))
    return (index, client_id, props.get(PROP_CLIENT_VERSION, ""), props.get(PROP_CONSUME_TYPE, ""),
            props.get(PROP_CONSUME_ORDERLY, "false") == "true", props.get("messageModel", ""), subs,
            len(info.mq_table), sum(q.cached_msg_count for q in info.mq_table.values()))


def analysis(infos: dict[str, ConsumerRunningInfo], now_ms: int) -> list[str]:
    """mqadmin's findings over a group's clients, in its words."""
    if not infos:
        return []
    if len({_subscriptions(i) for i in infos.values()}) > 1:
        return ["WARN: Different subscription in the same group of consumer!!!"]
    findings = ["Same subscription in the same group of consumer", "Rebalance OK"]
    for client_id, info in sorted(infos.items()):
        if info.properties.get(PROP_CONSUME_TYPE) != "CONSUME_PASSIVELY":
            continue
        orderly = info.properties.get(PROP_CONSUME_ORDERLY) == "true"
        for mq, q in sorted(info.mq_table.items()):
            where = f"{client_id} {mq.topic}:{mq.broker_name}:{mq.queue_id}"
            if orderly and not q.locked:
                findings.append(f"{where} can't lock for a while")
            elif not orderly and q.cached_msg_count > 0 and now_ms - q.last_consume_timestamp > BLOCKED_AFTER_MS:
                findings.append(f"{where} can't consume for a while, maybe blocked, "
                                f"{now_ms - q.last_consume_timestamp}ms")
    return findings


def queue_rows(info: ConsumerRunningInfo) -> list[tuple[Any, ...]]:
    return [(mq.topic, mq.broker_name, mq.queue_id, q.commit_offset, q.cached_msg_min_offset,
             q.cached_msg_max_offset, q.cached_msg_count, q.locked, q.dropped,
             _time(q.last_pull_timestamp), _time(q.last_consume_timestamp))
            for mq, q in sorted(info.mq_table.items())]


def subscription_rows(info: ConsumerRunningInfo) -> list[tuple[Any, ...]]:
    return sorted(_subscriptions(info))


def status_rows(info: ConsumerRunningInfo) -> list[tuple[Any, ...]]:
    return [(topic, *(status.get(f, 0) for f in STATUS_FIELDS))
            for topic, status in sorted(info.status_table.items())]


def queue_owners(infos: dict[str, ConsumerRunningInfo]) -> dict[tuple[str, str, int], str]:
    """(topic, broker name, queue id) -> the IP of the client holding it (its client id's
    part before '@', as mqadmin consumerProgress -s shows it)."""
    return {(mq.topic, mq.broker_name, mq.queue_id): client_id.split("@")[0]
            for client_id, info in infos.items() for mq in info.mq_table}
