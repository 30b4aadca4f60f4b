"""One local[2] SparkSession and one live broker for the whole folder (each extra session
costs 7-18 s here); every test uses topics of its own."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from rocketport.client import AdminClient, Message, Producer
from rocketport.core.config import BrokerConfig, ProtocolConfig
from tests.support.aio import run
from tests.support.live_broker import LiveBroker, start_live_broker
from tests.support.remoting import free_port


@pytest.fixture(scope="session")
def spark() -> Iterator:
    from rocketport.pipeline.session import local_session

    # two attempts per task: test_write forces a task retry
    session = local_session("rocketport-tests", "local[2,2]", **{"spark.driver.memory": "1g"})
    try:
        yield session
    finally:
        session.stop()


@pytest.fixture(scope="session")
def pipeline_config(tmp_path_factory) -> BrokerConfig:
    return BrokerConfig(
        store_path_root_dir=str(tmp_path_factory.mktemp("pipeline") / "store"),
        mapped_file_size_commit_log=4 << 20,
        flush_interval_commit_log=20,
        flush_interval_consume_queue=50,
        listen_port=free_port(),  # offset message ids embed the configured port
        namesrv=ProtocolConfig(True, 0),
        kafka=ProtocolConfig(True, 0),  # test_write_inner_batch reads with confluent-kafka
        stomp=ProtocolConfig(False, 0),
        amqp=ProtocolConfig(False, 0),
    )


@pytest.fixture(scope="session")
def broker(pipeline_config: BrokerConfig) -> Iterator[LiveBroker]:
    live = start_live_broker(pipeline_config)
    try:
        yield live
    finally:
        live.stop()


def create_topic(broker: LiveBroker, topic: str, queues: int = 4) -> None:
    async def main() -> None:
        async with AdminClient(broker.namesrv) as admin:
            await admin.create_topic(topic, queue_nums=queues)
    run(main())


def produce(broker: LiveBroker, messages: list[Message], *, per_queue: dict[int, list[Message]] | None = None,
            batch: int = 256) -> None:
    """Send `messages` round robin in batches (or `per_queue`: each list to its queue)."""
    async def main() -> None:
        async with Producer(broker.namesrv, "pipeline-test-producer") as producer:
            queues = await producer.runtime.routes.publish_queues(
                (messages or next(iter(per_queue.values())))[0].topic)
            plan = per_queue or {q.queue_id: messages[i::len(queues)] for i, q in enumerate(queues)}
            for mq in queues:
                msgs = plan.get(mq.queue_id, [])
                for i in range(0, len(msgs), batch):
                    await producer.send_batch(msgs[i:i + batch], queue=mq)
    run(main())
