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
from dataclasses import dataclass
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
from .text_format import label_text

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
        # per-object series: labels by topic, what the last scrape saw by topic@group, and
        # the base labels they hold
        self._topic_labels: dict[str, tuple[dict[str, str], str]] = {}
        self._keys: dict[str, _Key] = {}
        self._base: list[str] = []

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
                                        "key, remoting request code, AMQP method, STOMP command; -1: codes "
                                        "past the first 256).",
                                        labels=[*_BASE, "protocol", "request_code"])
        for front_end in self.front_ends:
            traffic = getattr(front_end, "traffic", None)
            if traffic is None or front_end.name == "http":
                continue
            if traffic.sizes is not None:
                sizes.add_metric([*base, front_end.name], _buckets(traffic.sizes), traffic.sizes.total)
            if traffic.latency is not None:
                for code, histogram in sorted(list(traffic.latency.by_code.items()), key=_code_order):
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
        """Per topic and per topic@group: the only families that grow with the broker. Each
        key's labels (dict and text) are made once and kept while the key lives, and its
        samples are text lines (`_TextFamily`): a scrape of 10,000 queues makes no Sample,
        labels dict or label text for a series it made before."""
        broker = self.broker
        queues: dict[str, list[tuple[int, int, int]]] = {}
        for topic, queue_id, low, high in broker.queue_offsets():
            entries = queues.get(topic)
            if entries is None:
                entries = queues[topic] = []
            entries.append((queue_id, low, high))
        if base != self._base:  # the names changed (live config): every label made again
            self._base, self._topic_labels, self._keys = base, {}, {}
        old_topics, topic_labels = self._topic_labels, {}
        topic_in = _TextFamily("rocketport_topic_messages", "Messages stored in the topic (its queues' "
                               "max offsets, since the store began).", "counter")
        rows = topic_in.rows
        for topic, entries in queues.items():
            labels = old_topics.get(topic) or self._labels_of({"topic": topic})
            topic_labels[topic] = labels
            rows.append((labels, sum([e[2] for e in entries])))
        self._topic_labels = topic_labels
        yield topic_in
        consumed = _TextFamily("rocketport_group_messages_consumed", "Messages the group consumed from "
                               "the topic since the broker started (how far its committed offsets moved "
                               "forward after its first commit on each queue), whatever protocol it "
                               "used.", "counter")
        lag = _TextFamily("rocketmq_consumer_lag_messages", "Messages in the topic past the group's "
                          "committed offsets.", "gauge")
        latency = _TextFamily("rocketmq_consumer_lag_latency", "Age of the oldest message past the "
                              "group's committed offsets, in milliseconds (0: none waits).", "gauge")
        consumed_out, lag_out, latency_out = consumed.rows, lag.rows, latency.rows
        totals = broker.consumed_totals()
        now_ms = int(time.time() * 1000)
        stamps, kept = self._stamps, {}
        read_stamp, deadline = broker.store_timestamp_at, time.perf_counter() + STAMP_BUDGET_S
        old_keys, keys = self._keys, {}
        none: list[tuple[int, int, int]] = []
        for key, committed in list(broker.committed_offsets().items()):
            seen = old_keys.get(key)
            if seen is None:
                topic, _, group = key.partition(TOPIC_GROUP_SEPARATOR)
                seen = _Key(topic, self._labels_of({"topic": topic, "consumer_group": group}))
            keys[key] = seen
            entries = queues.get(seen.topic, none)
            if seen.committed == committed and seen.entries == entries:  # as at the last scrape
                behind, oldest = seen.behind, seen.oldest
            else:
                topic, behind, oldest, whole = seen.topic, 0, None, True
                for queue_id, low, high in entries:
                    start = committed.get(queue_id, -1)
                    if start < low:
                        start = low
                    if high > start:
                        behind += high - start
                        # the store time of the first message past the commit: the last
                        # scrape's when the commit has not moved, else read within the budget
                        # (a cold page costs milliseconds; past it, a later scrape reads it)
                        where = (topic, queue_id)
                        known = stamps.get(where)
                        if known is None or known[0] != start:
                            if time.perf_counter() > deadline:
                                whole = False
                                continue
                            known = (start, read_stamp(topic, queue_id, start))
                        kept[where] = known
                        stored = known[1]
                        if stored is not None and (oldest is None or stored < oldest):
                            oldest = stored
                seen.behind, seen.oldest = behind, oldest
                seen.entries, seen.committed = (entries, dict(committed)) if whole else (None, None)
            labels = seen.labels
            consumed_out.append((labels, totals.get(key, 0)))
            lag_out.append((labels, behind))
            latency_out.append((labels, now_ms - oldest if oldest is not None and now_ms > oldest else 0))
        self._stamps, self._keys = kept, keys
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

    def _labels_of(self, own: dict[str, str]) -> tuple[dict[str, str], str]:
        labels = dict(zip(_BASE, self._base))
        labels.update(own)
        return labels, label_text(labels)


@dataclass(slots=True)
class _Key:
    """One topic@group's series as the last scrape saw them: its labels, and its lag and
    oldest waiting message's store time, reused while its queues and commits stay as they
    were (``entries`` and ``committed``, None when a store time was left for a later scrape)."""

    topic: str
    labels: tuple[dict[str, str], str]
    entries: list[tuple[int, int, int]] | None = None
    committed: dict[int, int] | None = None
    behind: int = 0
    oldest: int | None = None


class _TextFamily(Metric):
    """A family of many series kept as (labels, label text) and a value a row, written as
    text lines by `text_format.render` (``rows``); its Samples are made only when another
    writer (OpenMetrics) reads ``samples``."""

    def __init__(self, name: str, documentation: str, typ: str) -> None:
        # Metric.__init__ would set samples; these names are the module's own, valid
        self.name, self.documentation, self.unit, self.type = name, documentation, "", typ
        self.sample_name = name + "_total" if typ == "counter" else name
        self.rows: list[tuple[tuple[dict[str, str], str], int]] = []

    @property
    def samples(self) -> list[Sample]:  # type: ignore[override]
        name = self.sample_name
        return [Sample(name, labels[0], float(value), None, None) for labels, value in self.rows]


def _code_order(item: tuple[int | str, Histogram]) -> tuple[bool, int | str]:
    return isinstance(item[0], str), item[0]


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
