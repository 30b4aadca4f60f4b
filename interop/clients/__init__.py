"""The clients of the matrix: one adapter module each, named here in table order.

`FAST` is the fast subset's client per protocol (also the cross-protocol pairs' clients).
"""

from __future__ import annotations

import importlib

from ..base import Client

# name -> (module in this package, protocol); the module's `CLIENT` is the adapter class.
# Modules are imported only by the worker that runs them (they import their libraries).
CLIENTS: dict[str, tuple[str, str]] = {
    "rocketport.client": ("native", "remoting"),
    "rocketmq (C++)": ("rocketmq_cpp", "remoting"),
    "ali-ons": ("ali_ons", "remoting"),
    "confluent-kafka": ("confluent", "kafka"),
    "kafka-python": ("kafka_python", "kafka"),
    "kcat": ("kcat", "kafka"),
    "kafka-clients (Java)": ("java_kafka", "kafka"),
    "stomp.py": ("stomp_py", "stomp"),
    "stompman": ("stompman_client", "stomp"),
    "stompit": ("stompit", "stomp"),
    "pika": ("pika_client", "amqp"),
    "aio-pika": ("aio_pika_client", "amqp"),
    "kombu": ("kombu_client", "amqp"),
    "amqplib": ("amqplib", "amqp"),
}
FAST = {"remoting": "rocketmq (C++)", "kafka": "confluent-kafka", "stomp": "stomp.py",
        "amqp": "pika"}


def load(name: str) -> type[Client]:
    module = importlib.import_module(f"{__name__}.{CLIENTS[name][0]}")
    return module.CLIENT
