"""The fast text writer says what prometheus-client's own writer says, as Prometheus'
format reads it: the same families, types, help, samples and values."""

from __future__ import annotations

from prometheus_client import ProcessCollector, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import Collector, CollectorRegistry

from rocketport.protocols.http.text_format import render


class _Families(Collector):
    def collect(self):
        gauge = GaugeMetricFamily("lag", 'help with \\ and\nnewline', labels=["topic", "consumer_group"])
        gauge.add_metric(["plain", "g"], 3)
        gauge.add_metric(['quote"d', "back\\slash\nnewline"], 2.5)
        gauge.add_metric(["big", "g"], 1e20)
        gauge.add_metric(["inf", "g"], float("inf"))
        yield gauge
        counter = CounterMetricFamily("messages_in", "counted", labels=["protocol"])
        counter.add_metric(["kafka"], 12)
        yield counter
        histogram = HistogramMetricFamily("size", "sizes", buckets=[("1.0", 1), ("+Inf", 3)], sum_value=7)
        yield histogram
        yield GaugeMetricFamily("plain_gauge", "no labels", value=0.25)


def _parsed(text: bytes) -> set:
    return {(family.name, family.type, family.documentation, sample.name,
             tuple(sorted(sample.labels.items())), sample.value)
            for family in text_string_to_metric_families(text.decode())
            for sample in family.samples if not sample.name.startswith("process_")}


def test_render_reads_as_the_library_writes():
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Families())
    ProcessCollector(registry=registry)
    ours, theirs = render(registry), generate_latest(registry)
    assert _parsed(ours) == _parsed(theirs)
    assert len(_parsed(ours)) == 10  # 4 lag, 1 counter, 2 buckets + count + sum, 1 plain
    assert b'consumer_group="back\\\\slash\\nnewline"' in ours
    assert b"process_resident_memory_bytes" in ours


def test_render_holds_the_garbage_collector_off_only_while_it_runs():
    import gc

    class Watching(Collector):
        def collect(self):
            seen.append(gc.isenabled())
            yield GaugeMetricFamily("plain_gauge", "no labels", value=1)
    seen: list[bool] = []
    registry = CollectorRegistry(auto_describe=False)
    registry.register(Watching())
    assert gc.isenabled()
    render(registry)
    assert seen == [False] and gc.isenabled()
    gc.disable()
    try:  # held off by someone else: left so
        render(registry)
        assert not gc.isenabled()
    finally:
        gc.enable()
