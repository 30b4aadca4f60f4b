"""The /metrics collector: every figure read from the Broker facade and the front-ends
when Prometheus scrapes, none counted per message (docs/observability.md lists them).

Names follow RocketMQ 5's exporter (``rocketmq_*``, with its ``cluster``, ``node_type``,
``node_id``, ``topic`` and ``consumer_group`` labels); traffic and connections carry a
``protocol`` label as RabbitMQ's global counters do; what RocketMQ has no name for is
``rocketport_*``. Per-topic and per-group series (``http.metricsPerObject``) are the only
ones whose number grows with the broker's queues; without them a scrape is a few dozen
lines whatever the broker holds.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator, Sequence
from importlib.metadata import PackageNotFoundError, version
from typing import Final

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector
from prometheus_client.samples import Sample
from prometheus_client.utils import floatToGoString

from rocketport.core.broker import Broker

from ..frontend import FrontEnd
from ..histogram import Histogram
from .loop_lag import LoopLag

NODE_TYPE: Final = "broker"
# store reads a scrape may spend on lag latency's timestamps it has not seen (a cold page
# costs milliseconds: 10,000 at once would hold the loop for seconds); the rest come from
# later scrapes, each kept while its queue's committed offset stays
STAMP_BUDGET_S: Final = 0.02
_BASE: Final = ("cluster", "node_type", "node_id")
TOPIC_GROUP_SEPARATOR: Final = "@"


def _version() -> str:
    try:
        return version("rocketport")
    except PackageNotFoundError:
        return "unknown"


class BrokerCollector(Collector):
    """A prometheus-client Collector over one broker and its front-ends."""

    def __init__(self, broker: Broker, front_ends: Sequence[FrontEnd], loop_lag: LoopLag) -> None:
        self.broker = broker
        self.front_ends = front_ends  # the server's list: read at each scrape
        self.loop_lag = loop_lag
        self.version = _version()
        # (topic, queue id) -> (offset, store time of the message there, ms)
        self._stamps: dict[tuple[str, int], tuple[int, int | None]] = {}

    def collect(self) -> Iterable[Metric]:
        config = self.broker.config
        base = [config.broker_cluster_name, NODE_TYPE, config.broker_name]
        yield from self._broker_info(base)
        yield from self._protocols(base)
        yield from self._histograms(base)
        yield from self._store(base)
        yield from self._replication(base)
        yield from self._loop(base)
        if config.http.metrics_per_object:
            yield from self._per_object(base)

    def _stamp_reader(self) -> "_StampReader":
        return _StampReader(self.broker, self._stamps)

    # ------------------------------------------------------------------ families
    def _broker_info(self, base: list[str]) -> Iterator[Metric]:
        config = self.broker.config
        info = GaugeMetricFamily("rocketport_broker_info", "The broker: version, role and id (always 1).",
                                 labels=[*_BASE, "version", "broker_role", "broker_id"])
        info.add_metric([*base, self.version, config.broker_role, str(config.broker_id)], 1)
        yield info

    def _protocols(self, base: list[str]) -> Iterator[Metric]:
        names = ("protocol",)
        msgs_in = CounterMetricFamily("rocketmq_messages_in", "Messages stored through each protocol's "
                                      "front-end since the broker started.", labels=[*_BASE, *names])
        msgs_out = CounterMetricFamily("rocketmq_messages_out", "Messages handed to consumers by each "
                                       "protocol's front-end since the broker started (redeliveries "
                                       "included).", labels=[*_BASE, *names])
        bytes_in = CounterMetricFamily("rocketmq_throughput_in", "Bytes of the messages stored through "
                                       "each protocol, as the protocol carried them.",
                                       labels=[*_BASE, *names])
        bytes_out = CounterMetricFamily("rocketmq_throughput_out", "Bytes of the messages handed to "
                                        "consumers by each protocol, as the protocol carried them.",
                                        labels=[*_BASE, *names])
        producers = GaugeMetricFamily("rocketmq_producer_connections", "Open connections that have "
                                      "stored a message.", labels=[*_BASE, *names])
        per_group = self.broker.config.http.metrics_per_object
        consumers = GaugeMetricFamily("rocketmq_consumer_connections", "Open connections that consume "
                                      "(subscribed, fetched or pulled)" + (", by the consumer group they "
                                      "consume for (\"\": none named)." if per_group else "."),
                                      labels=[*_BASE, *names, *(("consumer_group",) if per_group else ())])
        connections = GaugeMetricFamily("rocketport_connections", "Open connections.", labels=[*_BASE, *names])
        for front_end in self.front_ends:
            traffic = getattr(front_end, "traffic", None)
            if traffic is None or front_end.name == "http":
                continue
            labels = [*base, front_end.name]
            msgs_in.add_metric(labels, traffic.messages_in)
            msgs_out.add_metric(labels, traffic.messages_out)
            bytes_in.add_metric(labels, traffic.bytes_in)
            bytes_out.add_metric(labels, traffic.bytes_out)
            counts = front_end.connections()
            producers.add_metric(labels, counts.producers)
            if per_group:
                for group, count in _consumers_by_group(front_end).items():
                    consumers.add_metric([*labels, group], count)
            else:
                consumers.add_metric(labels, counts.consumers)
            connections.add_metric(labels, counts.total)
        yield from (msgs_in, msgs_out, bytes_in, bytes_out, producers, consumers, connections)

    def _histograms(self, base: list[str]) -> Iterator[Metric]:
        sizes = HistogramMetricFamily("rocketmq_message_size", "Sizes of the messages stored through each "
                                      "protocol, in bytes (a batch counts at its average size).",
                                      labels=[*_BASE, "protocol"])
        latency = HistogramMetricFamily("rocketmq_rpc_latency", "Time from a request's arrival to its "
                                        "answer, in milliseconds, by protocol and request code (Kafka api "
                                        "key, remoting request code; -1: codes past the first 256).",
                                        labels=[*_BASE, "protocol", "request_code"])
        for front_end in self.front_ends:
            traffic = getattr(front_end, "traffic", None)
            if traffic is None or front_end.name == "http":
                continue
            if traffic.sizes is not None:
                sizes.add_metric([*base, front_end.name], _buckets(traffic.sizes), traffic.sizes.total)
            if traffic.latency is not None:
                for code, histogram in sorted(list(traffic.latency.by_code.items())):
                    latency.add_metric([*base, front_end.name, str(code)],
                                       _buckets(histogram), histogram.total)
        yield from (sizes, latency)

    def _replication(self, base: list[str]) -> Iterator[Metric]:
        """A master's slaves (acknowledged offset, bytes behind, in sync); a slave's own lag."""
        info = self.broker.ha.runtime_info()
        if "slaves" in info:
            acked = GaugeMetricFamily("rocketport_ha_slave_ack_offset", "CommitLog offset each connected "
                                      "slave has acknowledged.", labels=[*_BASE, "slave"])
            behind = GaugeMetricFamily("rocketport_ha_slave_behind_bytes", "CommitLog bytes each connected "
                                       "slave has not acknowledged.", labels=[*_BASE, "slave"])
            in_sync = GaugeMetricFamily("rocketport_ha_slave_in_sync", "1 when the slave is in sync "
                                        "(SYNC_MASTER waits for such slaves).", labels=[*_BASE, "slave"])
            for slave in info["slaves"]:  # type: ignore[union-attr]
                labels = [*base, str(slave["address"])]
                acked.add_metric(labels, slave["ackOffset"])
                behind.add_metric(labels, slave["lagBytes"])
                in_sync.add_metric(labels, 1 if slave["inSync"] else 0)
            yield from (acked, behind, in_sync)
        if "masterOffset" in info:
            yield _gauge("rocketport_ha_connected", "1 while this slave is connected to its master.", base,
                         1 if info["connected"] else 0)
            yield _gauge("rocketport_ha_behind_bytes", "CommitLog bytes this slave is behind its master "
                         "(-1: not known yet).", base, info["lagBytes"])  # type: ignore[arg-type]

    def _store(self, base: list[str]) -> Iterator[Metric]:
        broker = self.broker
        figures = broker.store_figures()
        stats = broker.stats()
        yield _gauge("rocketmq_storage_flush_behind_bytes", "CommitLog bytes written and not yet "
                     "flushed to disk.", base, figures.log_end - figures.flushed)
        yield _gauge("rocketmq_storage_dispatch_behind_bytes", "CommitLog bytes not yet dispatched to "
                     "ConsumeQueues (not yet visible to consumers).", base, figures.log_end - figures.dispatched)
        yield _gauge("rocketport_storage_index_behind_bytes", "CommitLog bytes not yet in the key and id "
                     "index.", base, max(0, figures.log_end - figures.index_built))
        yield _gauge("rocketport_storage_commitlog_segments", "CommitLog segment files.", base,
                     figures.commit_log_segments)
        yield _gauge("rocketport_storage_commitlog_bytes", "CommitLog bytes kept (log end minus its "
                     "first offset).", base, figures.log_end - stats.commit_log_min_offset)
        yield _gauge("rocketport_storage_disk_usage_ratio", "Used fraction of the store's disk "
                     "(diskMaxUsedSpaceRatio is measured against it).", base, figures.disk_usage_ratio)
        yield _gauge("rocketport_topics", "Topics.", base, stats.topics)
        yield _gauge("rocketport_queues", "ConsumeQueues.", base, stats.queues)
        put = CounterMetricFamily("rocketport_store_messages_put", "Messages the store appended "
                                  "since start, the broker's own (retries, schedules, offsets) included.",
                                  labels=list(_BASE))
        put.add_metric(base, stats.put_messages)
        yield put
        get = CounterMetricFamily("rocketport_store_messages_read", "Messages the store read for "
                                  "consumers since start.", labels=list(_BASE))
        get.add_metric(base, stats.get_messages)
        yield get

    def _loop(self, base: list[str]) -> Iterator[Metric]:
        latest, worst = self.loop_lag.take()
        yield _gauge("rocketport_event_loop_lag_seconds", "How late the event loop ran a timer "
                     "lately.", base, latest)
        yield _gauge("rocketport_event_loop_lag_max_seconds", "The worst event-loop lag since the "
                     "previous scrape.", base, worst)

    def _per_object(self, base: list[str]) -> Iterator[Metric]:
        """Per topic and per topic@group: the only families that grow with the broker, so
        their samples are appended directly (one labels dict shared by a key's samples)
        rather than through add_metric."""
        broker = self.broker
        cluster, node_type, node_id = base
        queues: dict[str, list[tuple[int, int, int]]] = {}
        for topic, queue_id, low, high in broker.queue_offsets():
            entries = queues.get(topic)
            if entries is None:
                entries = queues[topic] = []
            entries.append((queue_id, low, high))
        topic_in = CounterMetricFamily("rocketport_topic_messages", "Messages stored in the topic "
                                       "(its queues' max offsets, since the store began).",
                                       labels=[*_BASE, "topic"])
        name = topic_in.name + "_total"
        topic_in.samples = [Sample(name, {"cluster": cluster, "node_type": node_type, "node_id": node_id,
                                          "topic": topic}, float(sum([e[2] for e in entries])), None, None)
                            for topic, entries in queues.items()]
        yield topic_in
        consumed = CounterMetricFamily("rocketport_group_messages_consumed", "Messages the group "
                                       "consumed from the topic since the broker started (how far its "
                                       "committed offsets moved forward after its first commit on each "
                                       "queue), whatever protocol it used.",
                                       labels=[*_BASE, "topic", "consumer_group"])
        lag = GaugeMetricFamily("rocketmq_consumer_lag_messages", "Messages in the topic past the "
                                "group's committed offsets.", labels=[*_BASE, "topic", "consumer_group"])
        latency = GaugeMetricFamily("rocketmq_consumer_lag_latency", "Age of the oldest message past "
                                    "the group's committed offsets, in milliseconds (0: none waits).",
                                    labels=[*_BASE, "topic", "consumer_group"])
        consumed_name = consumed.name + "_total"
        consumed_out, lag_out, latency_out = consumed.samples, lag.samples, latency.samples
        totals = broker.consumed_totals()
        now_ms = time.time() * 1000
        stamp = self._stamp_reader()
        none: list[tuple[int, int, int]] = []
        for key, committed in list(broker.committed_offsets().items()):
            topic, _, group = key.partition(TOPIC_GROUP_SEPARATOR)
            labels = {"cluster": cluster, "node_type": node_type, "node_id": node_id,
                      "topic": topic, "consumer_group": group}
            behind = 0
            oldest: int | None = None
            for queue_id, low, high in queues.get(topic, none):
                start = committed.get(queue_id, -1)
                if start < low:
                    start = low
                if high > start:
                    behind += high - start
                    stored = stamp(topic, queue_id, start)
                    if stored is not None and (oldest is None or stored < oldest):
                        oldest = stored
            consumed_out.append(Sample(consumed_name, labels, float(totals.get(key, 0)), None, None))
            lag_out.append(Sample("rocketmq_consumer_lag_messages", labels, float(behind), None, None))
            latency_out.append(Sample("rocketmq_consumer_lag_latency", labels,
                                      max(0.0, now_ms - oldest) if oldest is not None else 0.0, None, None))
        self._stamps = stamp.kept
        yield from (consumed, lag, latency)
        ready = GaugeMetricFamily("rocketmq_consumer_ready_messages", "Messages waiting for a "
                                  "consumer of a group the broker delivers to (AMQP queues, STOMP "
                                  "subscriptions).", labels=[*_BASE, "consumer_group"])
        inflight = GaugeMetricFamily("rocketmq_consumer_inflight_messages", "Messages delivered to a "
                                     "consumer and not acknowledged yet (AMQP queues, STOMP "
                                     "subscriptions).", labels=[*_BASE, "consumer_group"])
        for group in broker.open_delivery_groups():
            ready.add_metric([*base, group.name], group.message_count)
            inflight.add_metric([*base, group.name], group.unacked_count)
        yield from (ready, inflight)


class _StampReader:
    """Store times of the first unconsumed messages: from the last scrape's when the offset
    is the same, else read within STAMP_BUDGET_S (None past it: that queue waits a scrape)."""

    def __init__(self, broker: Broker, known: dict[tuple[str, int], tuple[int, int | None]]) -> None:
        self._read = broker.store_timestamp_at
        self._known = known
        self.kept: dict[tuple[str, int], tuple[int, int | None]] = {}
        self._deadline = time.perf_counter() + STAMP_BUDGET_S

    def __call__(self, topic: str, queue_id: int, offset: int) -> int | None:
        key = (topic, queue_id)
        known = self._known.get(key)
        if known is not None and known[0] == offset:
            self.kept[key] = known
            return known[1]
        if time.perf_counter() > self._deadline:
            return None
        stored = self._read(topic, queue_id, offset)
        self.kept[key] = (offset, stored)
        return stored


def _buckets(histogram: Histogram) -> list[tuple[str, float]]:
    return [(floatToGoString(bound), count) for bound, count in histogram.cumulative()]


def _consumers_by_group(front_end: FrontEnd) -> dict[str, int]:
    """Consuming connections by the group they consume for ("": none named); every protocol
    has the "" series, 0 when nothing consumes without a group."""
    counts = {"": 0}
    for session in list(getattr(front_end, "sessions", ())):
        if session.consumes:
            for group in session.consumer_groups or ("",):
                counts[group] = counts.get(group, 0) + 1
    return counts


def _gauge(name: str, documentation: str, base: list[str], value: float) -> GaugeMetricFamily:
    family = GaugeMetricFamily(name, documentation, labels=list(_BASE))
    family.add_metric(base, value)
    return family
