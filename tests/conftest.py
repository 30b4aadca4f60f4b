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
