"""`rocketport store verify` and `store dump` show their progress through the CommitLog as
they go (bytes, every PROGRESS_STEP), not one step per segment, and verify ends with the bar
full."""

from __future__ import annotations

import asyncio

from rich.console import Console

from rocketport import store_tools
from rocketport.common.message import Message
from rocketport.core.store.message_store import MessageStore


class _Recorder:
    """The part of rich's Progress the walk uses, remembering every update."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        self.total = 0
        self.steps: list[int] = []
        self.completed: int | None = None

    def add_task(self, description: str, total: int) -> int:
        self.total = total
        return 1

    def advance(self, task: int, advance: float = 1) -> None:
        self.steps.append(int(advance))

    def update(self, task: int, completed: float) -> None:
        self.completed = int(completed)

    def __enter__(self) -> "_Recorder":
        made.append(self)
        return self

    def __exit__(self, *exc: object) -> None:
        pass


made: list[_Recorder] = []


def _write(config, topic: str = "Progress") -> None:
    async def write() -> None:
        store = MessageStore(config)  # 64 KiB segments
        store.open()
        await store.start()
        for i in range(120):
            await store.put_message(Message(topic, bytes(1000), {}, queue_id=0))
        await store.stop()
    asyncio.run(write())


def test_verify_advances_through_a_segment_in_steps(small_config, monkeypatch):
    _write(small_config)
    monkeypatch.setattr(store_tools, "PROGRESS_STEP", 8192)
    progress = _Recorder()
    records = list(store_tools.walk_commitlog(small_config.store_path_root_dir, [], progress))  # type: ignore[arg-type]
    assert len(records) == 120
    assert progress.total >= 120 * 1000
    in_segment = [step for step in progress.steps if step < 65536]
    assert len(in_segment) >= 8  # several updates inside each 64 KiB segment
    assert all(step >= 8192 for step in in_segment[:4])
    assert progress.completed == progress.total


def test_dump_shows_its_walk_to_the_messages(small_config, monkeypatch):
    """A dump of the last messages of a topic walks the whole log first: the bar moves."""
    _write(small_config, "Dumped")
    monkeypatch.setattr(store_tools, "PROGRESS_STEP", 8192)
    monkeypatch.setattr(store_tools, "Progress", _Recorder)
    made.clear()
    console = Console(record=True, width=200)
    shown = store_tools.dump(small_config.store_path_root_dir, console, topic="Dumped", queue=0, offset=118, limit=10)
    assert shown == 2 and "Dumped" in console.export_text()
    [progress] = made
    assert progress.total >= 120 * 1000 and sum(progress.steps) >= 100 * 1000

