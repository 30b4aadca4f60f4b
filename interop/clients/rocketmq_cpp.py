"""rocketmq 0.4.4 (PyPI): Python bindings of the C++ RocketMQ client 1.x, run through
interop/drivers/rocketmq_cpp.py in a subprocess (a C library: a crash costs only the driver)."""

from __future__ import annotations

import sys
from importlib import metadata

from ..base import Missing
from . import remoting_common as rc
from .driver import DRIVERS, DriverClient


class RocketmqCpp(DriverClient):
    name = "rocketmq (C++)"
    protocol = "remoting"
    codecs = rc.CODECS
    lacks = {
        "sql92": "the Python binding 0.4.4 subscribes by tag expression only (no SQL92 selector)",
        "transactions": "the Python binding 0.4.4 has no transactional producer",
    }

    def check(self) -> None:
        try:
            metadata.version("rocketmq")
        except metadata.PackageNotFoundError as exc:
            raise Missing("pip package rocketmq not installed (the test extra)") from exc

    def version(self) -> str:
        return metadata.version("rocketmq")

    def command(self) -> list[str]:
        return [sys.executable, str(DRIVERS / "rocketmq_cpp.py")]


CLIENT = RocketmqCpp
