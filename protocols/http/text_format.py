"""The Prometheus text format (version 0.0.4) of a prometheus-client registry, written in
one pass with a few string operations a sample.

prometheus-client's own writer (`generate_latest`) validates and escapes every label name
of every sample: about 10 µs a sample on the reference machine, over 100 ms for a broker
with 10,000 queues, the loop held meanwhile. This writer reads the same Metric families
(the collector, ProcessCollector and the family types stay prometheus-client's) and writes
what Prometheus and prometheus-client's parser read the same way; label names are the
collectors' own, valid by construction, so only label values are escaped, and only when
they hold a character that needs it. OpenMetrics (asked for by Accept) still goes through
prometheus-client's writer.
"""

from __future__ import annotations

import gc
from typing import Final

from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

CONTENT_TYPE: Final = "text/plain; version=0.0.4; charset=utf-8"
# the family types as the text format names them (OpenMetrics' others, as the library maps them)
_TYPES: Final = {"info": "gauge", "stateset": "gauge", "gaugehistogram": "histogram", "unknown": "untyped"}
_SUFFIX: Final = {"counter": "_total", "info": "_info"}


def _escape(value: str) -> str:
    if "\\" in value or '"' in value or "\n" in value:
        return value.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")
    return value


def label_text(labels: dict[str, str]) -> str:
    """The text between a sample's braces."""
    return ",".join([f'{key}="{_escape(label)}"' for key, label in labels.items()])


def render(registry: Collector) -> bytes:
    """The registry's families as text. The cyclic garbage collector is held off meanwhile:
    a scrape of 10,000 queues makes some 100,000 short-lived objects, none in a cycle (all
    freed by their counts), which would otherwise set off a hundred collections, the full
    ones walking the broker's whole heap."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        return _render(registry)
    finally:
        if enabled:
            gc.enable()


def _render(registry: Collector) -> bytes:
    out: list[str] = []
    add = out.append
    # a labels dict shared by several samples (the collector gives a topic@group's lag,
    # latency and consumption one) is rendered once; kept beside its text, so no later
    # dict can take its id while this render runs
    rendered: dict[int, tuple[dict[str, str], str]] = {}
    for metric in registry.collect():
        kind = metric.type
        name = metric.name + _SUFFIX.get(kind, "")
        doc = metric.documentation.replace("\\", r"\\").replace("\n", r"\n")
        add(f"# HELP {name} {doc}\n# TYPE {name} {_TYPES.get(kind, kind)}\n")
        rows = getattr(metric, "rows", None)
        if rows is not None:  # the collector's per-object families: (labels, text), an int
            name = metric.sample_name
            add("".join([f"{name}{{{labels[1]}}} {value}.0\n" for labels, value in rows]))
            continue
        for sample in metric.samples:
            labels = sample.labels
            value = sample.value
            text = (f"{value}.0" if type(value) is int else floatToGoString(value))
            if labels:
                known = rendered.get(id(labels))
                if known is None:
                    known = rendered[id(labels)] = (labels, label_text(labels))
                pairs = known[1]
                line = f"{sample.name}{{{pairs}}} {text}"
            else:
                line = f"{sample.name} {text}"
            if sample.timestamp is not None:
                line += f" {int(float(sample.timestamp) * 1000):d}"
            add(line + "\n")
    return "".join(out).encode()
