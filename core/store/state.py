"""The state `MessageStore.__init__` sets up, declared once for the role classes.

`MessageStore` is composed of role classes (recovery, writer, reader, dispatch: see
core/store/message_store.py) that read and write one shared state; each inherits this
declaration, so every role names the same attributes with the same types and a type
checker sees them. It declares only: it holds no values and never runs.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, Callable

if TYPE_CHECKING:
    from ..config import BrokerConfig
    from .checkpoint import CheckpointFile
    from .commitlog import CommitLog
    from .consume_queue import ConsumeQueue
    from .dispatch import _Dispatch
    from .flush import FlushService
    from .index_service import IndexService
    from .segment_preparer import SegmentPreparer


class StoreState:
    config: BrokerConfig
    root: str
    cq_root: str
    store_host: bytes  # the 8 bytes of IPv4 + port every record names as its store host
    _store_ip: bytes
    _store_port: int
    _preparer: SegmentPreparer
    commitlog: CommitLog
    checkpoint_file: CheckpointFile
    index: IndexService
    consume_queues: dict[tuple[str, int], ConsumeQueue]
    _written: set[ConsumeQueue]  # queues put into since the last ConsumeQueue flush
    _next_queue_offset: dict[tuple[str, int], int]
    _pending: deque[_Dispatch]
    _sync: bool
    max_body: int  # the largest body one put takes: the largest front-end limit (config.largest_message_size)
    _defer: bool
    dispatched_offset: int
    _verify_from: int
    _last_checkpoint_dispatched: int
    _tags_code_of: Callable[[str, dict[str, str]], int] | None
    ruled_topics: frozenset[str]
    dispatch_listeners: list[Callable[[str, int, int], None]]
    batch_listeners: list[Callable[[str, int, int, bytes | memoryview], None]]
    record_listeners: dict[str, Callable[[memoryview], None]]  # a slave: records of these topics
    flush_service: FlushService | None
    _deleted_topics: set[str]
    _running: bool
    _writable: bool  # running and a master: the put paths' one check
    # monotonic time after which puts are refused (an elected master's lease may have
    # expired: core/ha/election.py fences it); inf without an election
    write_deadline: float
    # the election's epoch, stamped on stored Kafka batches (put_inner_batch); -1: none
    leader_epoch: int
    slave: bool  # brokerRole=SLAVE, or a master demoted (core/ha): bytes come from the master
    recovered_from_crash: bool
    recovery_report: dict
    put_count: int
    put_bytes: int
    get_count: int
    get_bytes: int
