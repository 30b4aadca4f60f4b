"""Rocketport: a multi-protocol message broker with a RocketMQ-style store."""

__version__ = "0.1.0"
