"""Operator requests of mqadmin's broker section that change or clean the broker.

updateBrokerConfig (UPDATE_BROKER_CONFIG, 25: a live change of the keys the broker reads
where it uses them, persisted; the others refused naming why), cleanExpiredCQ (306),
cleanUnusedTopic (316), deleteExpiredCommitLog (329), brokerConsumeStats
(GET_BROKER_CONSUME_STATS, 317) and statsAll's VIEW_BROKER_STATS_DATA (315), each
answered as a RocketMQ broker answers it. Every call goes through the Broker facade;
nothing here touches the store.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

import orjson

from rocketport.core.broker import Broker
from rocketport.core.errors import ConfigError

from .codes import RequestCode, ResponseCode
from .command import RemotingCommand, make_response
from .kv_config import parse_properties_body
from .mq_tables import MessageQueueKey, encode_body as encode_mq_body

log = logging.getLogger(__name__)

Handler = Callable[[object, RemotingCommand], Awaitable[RemotingCommand]]


def consume_stats_table(broker: Broker, group: str, topic: str | None) -> dict[MessageQueueKey, dict]:
    """ConsumeStats' offset table: broker and consumer offset of every queue of the group's
    topics (one topic when named), with the metadata a Kafka consumer committed, if any."""
    name = broker.config.broker_name
    table = {}
    for t in [topic] if topic else sorted(broker.group_offsets(group)):
        cfg = broker.get_topic(t)
        if cfg is None:
            continue
        for q in range(cfg.read_queue_nums):
            entry = table[MessageQueueKey(t, name, q)] = {
                "brokerOffset": broker.max_offset(t, q),
                "consumerOffset": max(broker.query_offset(group, t, q), 0),
                "lastTimestamp": broker.last_store_timestamp(t, q)}
            metadata = broker.query_offset_metadata(group, t, q)
            if metadata:  # a Kafka commit's metadata; RocketMQ's readers ignore the field
                entry["metadata"] = metadata
    return table


class BrokerOperations:
    def __init__(self, broker: Broker, broker_addr: str) -> None:
        self.broker = broker
        self.broker_addr = broker_addr

    def routes(self) -> dict[int, Handler]:
        return {RequestCode.UPDATE_BROKER_CONFIG: self.update_broker_config,
                RequestCode.CLEAN_EXPIRED_CONSUMEQUEUE: self.clean_expired_consume_queue,
                RequestCode.CLEAN_UNUSED_TOPIC: self.clean_unused_topic,
                RequestCode.DELETE_EXPIRED_COMMITLOG: self.delete_expired_commit_log,
                RequestCode.GET_BROKER_CONSUME_STATS: self.get_broker_consume_stats,
                RequestCode.VIEW_BROKER_STATS_DATA: self.view_broker_stats_data}

    async def update_broker_config(self, session: object, request: RemotingCommand) -> RemotingCommand:
        changes = parse_properties_body(bytes(request.body or b""))
        if not changes:
            return make_response(request, ResponseCode.SYSTEM_ERROR, "no key=value in the request body")
        try:
            applied = self.broker.update_config(changes)
        except ConfigError as exc:
            return make_response(request, ResponseCode.SYSTEM_ERROR, "; ".join(str(exc).splitlines()))
        log.info("configuration changed by updateBrokerConfig: %s",
                 ", ".join(f"{k}={v}" for k, v in applied.items()))
        return make_response(request, ResponseCode.SUCCESS)

    async def clean_expired_consume_queue(self, session: object, request: RemotingCommand) -> RemotingCommand:
        n = self.broker.clean_expired_consume_queues()
        log.info("cleanExpiredCQ: %d consume queue files and queues deleted", n)
        return make_response(request, ResponseCode.SUCCESS)

    async def clean_unused_topic(self, session: object, request: RemotingCommand) -> RemotingCommand:
        gone = self.broker.clean_unused_topics()
        log.info("cleanUnusedTopic: consume queues of %d topic(s) deleted: %s", len(gone), ", ".join(gone))
        return make_response(request, ResponseCode.SUCCESS)

    async def delete_expired_commit_log(self, session: object, request: RemotingCommand) -> RemotingCommand:
        n = self.broker.delete_expired_commit_log()
        log.info("deleteExpiredCommitLog: %d CommitLog segment(s) deleted", n)
        return make_response(request, ResponseCode.SUCCESS)

    async def get_broker_consume_stats(self, session: object, request: RemotingCommand) -> RemotingCommand:
        """ConsumeStatsList: per subscription group, its ConsumeStats (one per topic), and
        the total lag; groups whose topics have no queues here are left out."""
        groups, total = [], 0
        for group in sorted(self.broker.groups_table()):
            stats = []
            for topic in sorted(self.broker.group_offsets(group)):
                table = consume_stats_table(self.broker, group, topic)
                if table:
                    total += sum(max(0, e["brokerOffset"] - e["consumerOffset"]) for e in table.values())
                    stats.append(encode_mq_body({"consumeTps": 0.0}, {"offsetTable": table}))
            if stats:
                groups.append(b"{%s:[%s]}" % (orjson.dumps(group), b",".join(stats)))
        body = b'{"brokerAddr":%s,"consumeStatsList":[%s],"totalDiff":%d}' % (
            orjson.dumps(self.broker_addr), b",".join(groups), total)
        return make_response(request, ResponseCode.SUCCESS, body=body)

    async def view_broker_stats_data(self, session: object, request: RemotingCommand) -> RemotingCommand:
        """BrokerStatsData of one stats item (statsName TOPIC_PUT_NUMS with a topic,
        GROUP_GET_NUMS with topic@group, BROKER_PUT_NUMS / BROKER_GET_NUMS with the cluster
        name): sum, tps and avgpt over the last minute, hour and day."""
        name = request.ext_fields.get("statsName", "")
        key = request.ext_fields.get("statsKey", "")
        data = self.broker.traffic_stats(name, key)
        if data is None:
            return make_response(request, ResponseCode.SYSTEM_ERROR, f"The stats <{name}> <{key}> not exist")
        body = {f"stats{span}": {"sum": w.sum, "tps": w.tps, "avgpt": w.avgpt}
                for span, w in (("Minute", data.minute), ("Hour", data.hour), ("Day", data.day))}
        return make_response(request, ResponseCode.SUCCESS, body=orjson.dumps(body))
