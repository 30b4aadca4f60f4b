"""Errors of the shared formats, and the base of every error the core reports.

The core's own errors (core/errors.py) derive from BrokerError; a front-end maps them all
to its protocol's codes. Never put protocol codes here.
"""

from __future__ import annotations


class BrokerError(Exception):
    """Base of every error the core reports to a front-end."""


class InvalidMessage(BrokerError):
    """A message is malformed (bad properties, bad batch, empty topic...)."""


class MessageNotFound(BrokerError):
    """No message at the given id / commit-log offset."""
