"""The example pipelines' jobs (pipeline/examples), run on the test session and broker."""

from __future__ import annotations

import datetime
import json
from collections import defaultdict

import pytest

from rocketport.pipeline.examples import dlq_report, order_totals
from tests.pipeline.conftest import create_topic
from tests.pipeline.test_write import read_back


@pytest.mark.slow  # ~40 s under load: a stateful windowed aggregation over several micro-batches
def test_order_totals_per_minute_and_tag(spark, broker, tmp_path):
    create_topic(broker, "DemoOrders", 2)
    create_topic(broker, "DemoTotals", 2)
    orders = order_totals.send_demo_orders(broker.namesrv, "DemoOrders", 600)
    q = (order_totals.build(spark, broker.namesrv, "DemoOrders").writeStream.format("rocketport")
         .option("namesrv", broker.namesrv).option("topic", "DemoTotals")
         .option("checkpointLocation", str(tmp_path / "c")).trigger(availableNow=True).start())
    q.awaitTermination(300)
    # the minutes the watermark closed (it trails the newest order by one minute)
    events = [(datetime.datetime.fromisoformat(json.loads(m.body)["ts"]), m.tags, json.loads(m.body)["amount"])
              for m in orders]
    watermark = max(ts for ts, _, _ in events) - datetime.timedelta(minutes=1)
    want: dict[str, list] = defaultdict(lambda: [0.0, 0])
    for ts, tag, amount in events:
        minute = ts.replace(second=0)
        if minute + datetime.timedelta(minutes=1) <= watermark:
            want[f"{minute}/{tag}"][0] += amount
            want[f"{minute}/{tag}"][1] += 1
    got = read_back(broker, "DemoTotals", len(want))
    assert len(want) >= 8 * 4 - 2  # eight closed minutes, (nearly) every tag in each
    assert {m.properties["__SHARDINGKEY"]: (json.loads(m.body)["total"], json.loads(m.body)["orders"])
            for m in got} == {k: (round(t, 2), n) for k, (t, n) in want.items()}
    assert len(got) == len(want)  # each closed minute written once


def test_dlq_report(spark, broker):
    dlq_report.send_demo_dead_letters(broker.namesrv)
    topics = dlq_report.dlq_topics(broker.namesrv)
    assert topics == ["%DLQ%billing", "%DLQ%shipping"]
    rows = {r.group: r for r in dlq_report.report(spark, broker.namesrv, topics, "FAILURE_REASON").collect()}
    billing, shipping = rows["billing"], rows["shipping"]
    assert (billing.dead, billing.from_topics, billing.first_reasons) == (
        9, ["billing-events"], ["card declined", "timeout calling bank"])
    assert (shipping.dead, shipping.first_reasons) == (6, ["address invalid", "unknown"])
    assert isinstance(billing.first, datetime.datetime) and billing.first <= billing.last
