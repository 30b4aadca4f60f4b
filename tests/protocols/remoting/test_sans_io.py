"""Every protocol package's codec stays sans-IO: outside a package's transport and waiting
side (its session, front-end, clients and the handlers that wait on timers or long polls),
no module imports asyncio, sockets or another event loop. Checked for all four packages."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import rocketport.protocols.amqp as amqp
import rocketport.protocols.kafka as kafka
import rocketport.protocols.remoting as remoting
import rocketport.protocols.stomp as stomp

FORBIDDEN = {"asyncio", "socket", "selectors", "trio", "uvloop"}
# The modules of each package that may do I/O or wait; every other module must stay sans-IO.
IO_MODULES = {
    # slave_sync: a timer; group_peers asks the other brokers of the group over the network
    remoting: {"session", "client", "handlers", "namesrv", "frontend", "slave_sync", "group_peers"},
    # group timers; fetch long polls; produce gathers a request's appends;
    # consumer_group_log writes changed KIP-848 group state on a timer
    kafka: {"session", "frontend", "coordinator", "fetch", "produce", "consumer_group_log"},
    stomp: {"session", "frontend"},
    # publish settles puts as they finish; dead_letter stores copies from one task;
    # queue_limits sleeps until a queue's head is due
    amqp: {"session", "frontend", "publish", "dead_letter", "queue_limits"},
}
CODECS = {remoting: "frame", kafka: "codec", stomp: "codec", amqp: "codec"}


def _imports(path: Path) -> list[str]:
    names: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            names.append(node.module or "")
    return names


@pytest.mark.parametrize("package", list(IO_MODULES), ids=lambda p: p.__name__.rsplit(".", 1)[-1])
def test_no_codec_module_imports_io(package) -> None:
    modules = sorted(Path(package.__file__).parent.glob("*.py"))
    checked = [path for path in modules if path.stem not in IO_MODULES[package]]
    assert CODECS[package] in {path.stem for path in checked}
    for path in checked:
        for name in _imports(path):
            assert name.split(".")[0] not in FORBIDDEN, f"{package.__name__}.{path.stem} imports {name}"
