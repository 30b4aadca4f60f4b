"""A `rocketport broker` process on the shipped conf/broker.yaml serves /metrics on the
listener its log names, counts what a Kafka client produced, and survives a client that
sends it garbage."""

from __future__ import annotations

import re
import socket
import urllib.request

from confluent_kafka import Producer
from prometheus_client.parser import text_string_to_metric_families

from tests.support.processes import start_broker, stop, wait_ready

_LISTENING = re.compile(r"(\S+(?: \([^)]*\))?) listening on ([\d.]+):(\d+)")


def test_shipped_config_serves_metrics(tmp_path):
    proc = start_broker(tmp_path / "store", "listenPort=0", "namesrv.port=0", "kafka.port=0")
    try:
        log = wait_ready(proc)
        ports = {m.group(1): int(m.group(3)) for m in _LISTENING.finditer(log)}
        assert "http" in ports, log  # named in the start-up log like every listener
        producer = Producer({"bootstrap.servers": f"127.0.0.1:{ports['kafka']}"})
        for i in range(7):
            producer.produce("ProcT", b"%d" % i)
        assert producer.flush(20) == 0
        with socket.create_connection(("127.0.0.1", ports["http"]), timeout=20) as sock:
            sock.sendall(b"\x00\x01garbage\r\n\r\n")
            assert sock.recv(100).startswith(b"HTTP/1.1 400")
        with urllib.request.urlopen(f"http://127.0.0.1:{ports['http']}/metrics", timeout=20) as answer:
            text = answer.read().decode()
        samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
                   for family in text_string_to_metric_families(text) for s in family.samples}
        base = (("cluster", "DefaultCluster"), ("node_id", "broker-a"), ("node_type", "broker"))
        assert samples[("rocketmq_messages_in_total", (*base, ("protocol", "kafka")))] == 7
        assert samples[("rocketport_topic_messages_total", (*base, ("topic", "ProcT")))] == 7
        assert proc.poll() is None
    finally:
        stop(proc)
    assert proc.returncode == 0
