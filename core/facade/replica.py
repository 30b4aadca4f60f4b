"""What a slave copies from its master besides the CommitLog: RocketMQ 4.x's
SlaveSynchronize (topics, subscription groups, consumer offsets, delay offsets), applied
here; the remoting front-end fetches them (protocols/remoting/slave_sync.py) every 10 s.
`suggested_broker_id` is the master's side of slave reads (slaveReadEnable).

Each `apply_*` replaces the slave's table with the master's, as RocketMQ's slave does, and
persists it, so a slave promoted later starts from the last copy (up to 10 s old: see
docs/operations.md for what a failover can lose and the ordered channel that would close
it). They never write the CommitLog and are refused on a master (it owns its tables).
"""

from __future__ import annotations

import os
import struct
import time
from typing import TYPE_CHECKING, Any

from ..errors import StoreUnavailable
from ..metadata.subscription_groups import SubscriptionGroupConfig
from ..metadata.topics import TopicConfig
from ..store.get_result import GetResult

if TYPE_CHECKING:
    from ..broker import Broker


def _slave_only(broker: "Broker") -> None:
    if not broker.config.is_slave:
        raise StoreUnavailable("a master owns its metadata: only a slave copies its master's")


def apply_topics(broker: "Broker", raw: dict[str, Any]) -> bool:
    """The master's topic table (its JSON: name -> TopicConfig object); whether anything
    changed. ValueError, KeyError or TypeError for a table that is not one."""
    _slave_only(broker)
    return _replace_table(broker.topics, {str(name): TopicConfig.from_json(d) for name, d in raw.items()})


def apply_groups(broker: "Broker", raw: dict[str, Any]) -> bool:
    """The master's subscription groups (its JSON: name -> SubscriptionGroupConfig)."""
    _slave_only(broker)
    return _replace_table(broker.groups,
                          {str(name): SubscriptionGroupConfig.from_json(d) for name, d in raw.items()})


def _replace_table(mine: Any, table: dict[str, Any]) -> bool:
    """Put the master's table (topic or subscription-group configs) in place of ours and
    save it; whether it differed."""
    if {n: c.to_json() for n, c in mine.table.items()} == {n: c.to_json() for n, c in table.items()}:
        return False
    mine.table = dict(table)
    mine.data_version += 1
    mine.persist()
    return True


def apply_offsets(broker: "Broker", raw: dict[str, Any]) -> bool:
    """The master's consumer offsets (``topic@group`` -> queue -> offset)."""
    _slave_only(broker)
    table = {str(key): {int(q): int(o) for q, o in queues.items()} for key, queues in raw.items()}
    mine = broker.offsets
    if mine.table == table:
        return False
    mine.table = {key: dict(queues) for key, queues in table.items()}
    mine.version += 1
    mine.persist()
    return True


def apply_delay_offsets(broker: "Broker", raw: dict[str, Any]) -> bool:
    """The master's delay offsets (level -> next offset)."""
    _slave_only(broker)
    table = {int(level): int(o) for level, o in raw.items()}
    if broker.delay_offsets.table == table:
        return False
    broker.delay_offsets.table = dict(table)
    broker.delay_offsets.save(table)
    return True


def apply_master_log_end(broker: "Broker", raw: str | None) -> None:
    """The master's CommitLog end (its runtime info's commitLogMaxOffset): how far a slave
    catching up has to go, which RocketMQ's HA wire does not say."""
    slave = broker.ha.slave
    if raw is not None and slave is not None:
        slave.master_log_end, slave.master_log_end_at = int(raw), time.monotonic()


def delay_offsets(broker: "Broker") -> dict[int, int]:
    """The master's delay offsets as its schedule service has them now (GET_ALL_DELAY_OFFSET)."""
    return dict(broker.delay_offsets.table)  # the schedule service advances this table


def consumer_offsets(broker: "Broker") -> dict[str, dict[int, int]]:
    """Every committed offset (GET_ALL_CONSUMER_OFFSET): ``topic@group`` -> queue -> offset."""
    return {key: dict(queues) for key, queues in broker.offsets.table.items()}


_TOTAL_MEMORY = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
_PHYSICAL_OFFSET = struct.Struct(">q")  # a record's physicalOffset, at byte 28


def suggested_broker_id(broker: "Broker", group: str, result: GetResult) -> int:
    """RocketMQ's suggestWhichBrokerId for a pull: with slaveReadEnable, a consumer reading
    further behind the log's end than accessMessageInMemoryMaxRatio % of the machine's
    memory (pages likely gone from the cache) is told to read from the group's
    whichBrokerWhenConsumeSlowly (a slave), else from the master (0)."""
    config = broker.config
    if not config.slave_read_enable or not result.segments:
        return 0
    first = _PHYSICAL_OFFSET.unpack_from(result.segments[0].view, 28)[0]
    behind = broker.store.commitlog.max_offset - first
    if behind <= _TOTAL_MEMORY * config.access_message_in_memory_max_ratio / 100:
        return 0
    cfg = broker.groups.get(group)
    return cfg.which_broker_when_consume_slowly if cfg is not None else config.which_broker_when_consume_slowly
