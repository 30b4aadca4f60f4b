"""ali-ons (npm): the pure JavaScript RocketMQ 4.x client, through interop/node/ali_ons.js."""

from __future__ import annotations

from . import remoting_common as rc
from .node import NodeClient


class AliOns(NodeClient):
    name = "ali-ons"
    protocol = "remoting"
    package = "ali-ons"
    script = "ali_ons.js"
    codecs = rc.CODECS
    lacks = {
        "ordered": "ali-ons 3.12 has no queue selector for sends and no orderly consumer",
        "transactions": "ali-ons 3.12 has no transactional producer",
    }


CLIENT = AliOns
