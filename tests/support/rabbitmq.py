"""The suite's RabbitMQ and Rocketport peers: a pytest plugin (tests/conftest.py loads it).

RabbitMQ decides what Rocketport's AMQP and STOMP front-ends should do (issue
[rabbitmq-parity]), so tests run the same client script against both, side by side. This
plugin gives them:

- ``rabbitmq``: one private RabbitMQ 3.10 node with rabbitmq_stomp and rabbitmq_web_stomp
  (STOMP over WebSocket) per test session, on free loopback ports, its every file under
  the session's tmp dir. It is started by
  bench/peers/rabbitmq.py, the benchmarks' own module, loaded here by path (the bench never
  imports the tests). Missing ``rabbitmq-server`` fails the test with how to install it: it
  is part of the suite (scripts/install-test-deps installs it), so it is never skipped.
- ``rocketport``: one real ``rocketport broker`` process per session with the shipped
  configuration (conf/broker.yaml, a RabbitMQ user's first run) on free ports.
- ``parity``: the differential harness of tests/parity/harness.py over both.

Every test that uses ``rabbitmq`` (directly or through ``parity``) is marked ``rabbitmq``, so
``-m 'not rabbitmq'`` leaves them out where no node can run.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from tests.support.processes import REPO, RestartableBroker

# the shipped configuration, on free ports, with the front-ends RabbitMQ has
ROCKETPORT_SETTINGS = ("listenPort=0", "namesrv.port=0", "kafka.enabled=false")


def _load_peer() -> ModuleType:
    """bench/peers/rabbitmq.py as a module (bench/ is no package: loaded by path)."""
    name = "rocketport_bench_peers_rabbitmq"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, REPO / "bench" / "peers" / "rabbitmq.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    return module


peer = _load_peer()
RabbitMQ = peer.RabbitMQ


def start_rabbitmq(workdir: Path) -> RabbitMQ:
    """A private node on free ports under ``workdir``; a failed test (not a skip) when
    RabbitMQ is not installed or does not come up."""
    try:
        return peer.start(0, 0, str(workdir))
    except peer.PeerUnavailable as e:
        pytest.fail(f"RabbitMQ is needed by this test and is part of the suite: {e}", pytrace=False)


class RocketportProcess(RestartableBroker):
    """A ``rocketport broker`` process whose AMQP and STOMP ports are read from its log."""

    def __init__(self, root: Path, *settings: str) -> None:
        super().__init__(root, *ROCKETPORT_SETTINGS, *settings)

    def port(self, role: str) -> int:
        """The port of the listener with this role ("amqp", "stomp") from the latest start."""
        found = re.findall(rf"{re.escape(role)} listening on 127\.0\.0\.1:(\d+)", self.log.read_text())
        if not found:
            raise LookupError(f"no {role} listener in {self.log}")
        return int(found[-1])

    @property
    def amqp_port(self) -> int:
        return self.port("amqp")

    @property
    def stomp_port(self) -> int:
        return self.port("stomp")


def start_rocketport(workdir: Path, *settings: str) -> RocketportProcess:
    """A started broker on a fresh store under ``workdir`` (extra ``--set`` settings)."""
    workdir.mkdir(parents=True, exist_ok=True)
    broker = RocketportProcess(workdir / "store", *settings)
    broker.start()
    return broker


@pytest.fixture(scope="session")
def rabbitmq(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RabbitMQ]:
    node = start_rabbitmq(tmp_path_factory.mktemp("rabbitmq"))
    try:
        yield node
    finally:
        node.stop()


@pytest.fixture(scope="session")
def rocketport(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RocketportProcess]:
    broker = start_rocketport(tmp_path_factory.mktemp("rocketport"))
    try:
        yield broker
    finally:
        broker.stop()


@pytest.fixture
def parity(rabbitmq: RabbitMQ, rocketport: RocketportProcess, request: pytest.FixtureRequest):
    from tests.parity.harness import Differential, Peer
    return Differential(
        Peer("rabbitmq", "127.0.0.1", rabbitmq.amqp_port, rabbitmq.stomp_port, ws_port=rabbitmq.web_stomp_port),
        Peer("rocketport", "127.0.0.1", rocketport.amqp_port, rocketport.stomp_port,
             ws_port=rocketport.port("stomp (websocket)")),
        request.node.name)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "rabbitmq" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.rabbitmq)
