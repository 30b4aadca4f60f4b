"""amqplib (npm): the Node.js AMQP 0-9-1 client, through interop/node/amqplib.js."""

from __future__ import annotations

from ..base import Consume
from . import amqp_common as ac
from .node import NodeClient


class Amqplib(NodeClient):
    name = "amqplib"
    protocol = "amqp"
    package = "amqplib"
    script = "amqplib.js"
    fields = ac.FIELDS
    precreate = False
    lacks = {**ac.LACKS, "transactions": "amqplib has no tx.select / tx.commit API"}

    def prepare(self, topic: str, group: str, c: Consume) -> None:
        self._run({"cmd": "prepare", "topic": topic, "group": group, "tag_filter": c.tag_filter})


CLIENT = Amqplib
