import pytest

from rocketport.core.config import BrokerConfig, ProtocolConfig

# the RabbitMQ node, a Rocketport broker process and the differential harness over both
pytest_plugins = ["tests.support.rabbitmq"]


@pytest.fixture
def small_config(tmp_path) -> BrokerConfig:
    """Small segments so rollover, BLANK records and multi-file queues happen in tests."""
    return BrokerConfig(
        store_path_root_dir=str(tmp_path / "store"),
        mapped_file_size_commit_log=64 * 1024,
        mapped_file_size_consume_queue=20 * 64,
        max_hash_slot_num=64,
        max_index_num=256,
        flush_interval_commit_log=20,
        flush_interval_consume_queue=50,
        # front-ends a test does not turn on stay off, and never on their default ports
        stomp=ProtocolConfig(False, 0),
        amqp=ProtocolConfig(False, 0),
    )


# session-wide servers: every test that uses one runs on the same pytest-xdist worker, so
# that none of them is started twice
_SHARED_SERVERS = {"rabbitmq": "rabbitmq", "rocketport": "rabbitmq", "spark": "spark"}


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist's own hook reads the groups
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Group tests for ``--dist loadgroup``: by session server, else by module (whose
    module-scoped brokers then start once)."""
    for item in items:
        # a test that asks for RabbitMQ by request.getfixturevalue carries only the marker
        group = "rabbitmq" if item.get_closest_marker("rabbitmq") else \
            next((g for f, g in _SHARED_SERVERS.items() if f in item.fixturenames),
                 item.nodeid.split("::", 1)[0])
        item.add_marker(pytest.mark.xdist_group(group))
