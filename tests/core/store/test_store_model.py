"""Property-based test: random put / batch / inner-batch / get / restart / crash-restart
sequences against a plain in-memory model of what the store must hold."""

import asyncio
import shutil
import tempfile

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from rocketport.common.message import Message
from rocketport.core.config import BrokerConfig
from rocketport.core.store.message_store import MessageStore
from rocketport.core.store.record import decode_record

from .helpers import crash

TOPICS = ("A", "B")
QUEUES = 3


class StoreModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.root = tempfile.mkdtemp(prefix="rp-model-")
        self.config = BrokerConfig(store_path_root_dir=self.root,
                                   mapped_file_size_commit_log=16 * 1024,
                                   mapped_file_size_consume_queue=20 * 32,
                                   max_hash_slot_num=32, max_index_num=128,
                                   max_message_size=8 * 1024)
        self.loop = asyncio.new_event_loop()
        # model: (topic, queue) -> list of ("msg", body) or ("batch", batch_body, index)
        self.model: dict[tuple[str, int], list[tuple]] = {}
        self.store = self._open()

    def _open(self) -> MessageStore:
        store = MessageStore(self.config)
        store.open()
        self.loop.run_until_complete(store.start())
        return store

    def teardown(self) -> None:
        self.loop.run_until_complete(self.store.stop())
        self.loop.close()
        shutil.rmtree(self.root, ignore_errors=True)

    @rule(topic=st.sampled_from(TOPICS), queue=st.integers(0, QUEUES - 1),
          body=st.binary(min_size=0, max_size=3000), tag=st.sampled_from([None, "x", "y"]))
    def put(self, topic, queue, body, tag):
        props = {"TAGS": tag} if tag else {}
        r = self.loop.run_until_complete(self.store.put_message(Message(topic, body, props, queue_id=queue)))
        q = self.model.setdefault((topic, queue), [])
        assert r.queue_offset == len(q)
        q.append(("msg", body))

    @rule(topic=st.sampled_from(TOPICS), queue=st.integers(0, QUEUES - 1),
          bodies=st.lists(st.binary(max_size=400), min_size=1, max_size=8))
    def put_batch(self, topic, queue, bodies):
        msgs = [Message(topic, b, queue_id=queue) for b in bodies]
        r = self.loop.run_until_complete(self.store.put_messages(msgs))
        q = self.model.setdefault((topic, queue), [])
        assert r.queue_offset == len(q) and r.count == len(bodies)
        q.extend(("msg", b) for b in bodies)

    @rule(topic=st.sampled_from(TOPICS), queue=st.integers(0, QUEUES - 1),
          count=st.integers(1, 20), payload=st.binary(min_size=0, max_size=2000))
    def put_inner_batch(self, topic, queue, count, payload):
        batch = bytes(8) + payload
        r = self.loop.run_until_complete(self.store.put_inner_batch(topic, queue, batch, count))
        q = self.model.setdefault((topic, queue), [])
        assert r.queue_offset == len(q)
        for i in range(count):
            q.append(("batch", payload, r.queue_offset))

    @rule(topic=st.sampled_from(TOPICS), queue=st.integers(0, QUEUES - 1),
          start=st.integers(0, 60), max_count=st.integers(1, 40))
    def get(self, topic, queue, start, max_count):
        expected = self.model.get((topic, queue), [])
        res = self.store.get_messages(topic, queue, start, max_count)
        if start >= len(expected):
            assert res.message_count == 0
            return
        want = expected[start:start + max_count]
        got = []
        for seg in res.segments:
            if seg.is_inner_batch:
                rec = decode_record(seg.view)
                for i in range(seg.count):
                    got.append(("batch", rec.body[8:], seg.batch_base))
                assert int.from_bytes(rec.body[:8], "big") == seg.batch_base
            else:
                got.extend(("msg", m.body) for m in self._records(seg))
        # a read ends at a ConsumeQueue file's end (RocketMQ's too): the next get goes on from there
        per_file = self.config.mapped_file_size_consume_queue // 20
        if len(got) < len(want):
            assert got and res.next_begin_offset % per_file == 0, (got, want, res.next_begin_offset)
        assert got == want[:len(got)]
        assert res.next_begin_offset == start + len(got)

    @staticmethod
    def _records(seg):
        view, pos = seg.view, 0
        for _ in range(seg.count):
            m = decode_record(view, pos)
            pos += m.store_size
            yield m

    @rule()
    def restart(self):
        self.loop.run_until_complete(self.store.stop())
        self.store = self._open()

    @rule()
    def crash_restart(self):
        self.loop.run_until_complete(crash(self.store))
        self.store = self._open()

    @invariant()
    def offsets_match_model(self):
        for (topic, queue), items in self.model.items():
            assert self.store.max_offset(topic, queue) == len(items)


StoreModel.TestCase.settings = settings(max_examples=25, stateful_step_count=30, deadline=None,
                                        suppress_health_check=[HealthCheck.too_slow])
TestStoreModel = StoreModel.TestCase
