"""stompit (npm): a Node.js STOMP client, through interop/node/stompit.js."""

from __future__ import annotations

from . import stomp_common as sc
from .node import NodeClient


class Stompit(NodeClient):
    name = "stompit"
    protocol = "stomp"
    package = "stompit"
    script = "stompit.js"
    fields = sc.FIELDS
    lacks = dict(sc.LACKS)


CLIENT = Stompit
