"""Real applications (Celery, kombu, Dramatiq) against the session's Rocketport broker process
(tests/support/rabbitmq.py's ``rocketport``: ``rocketport broker`` on the shipped
configuration, as users run it, on free ports)."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def amqp_url(rocketport) -> str:
    """``amqp://guest:guest@127.0.0.1:<port>//``: RabbitMQ's default account and vhost."""
    return f"amqp://guest:guest@127.0.0.1:{rocketport.amqp_port}//"
