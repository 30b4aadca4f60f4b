"""Declarative descriptions of every on-disk format, with ``construct``.

The hot path writes with precompiled ``struct`` layouts; these descriptions are a second,
independent statement of the same bytes. The store tools (verify, dump) read through them
and the tests use them to decode what the hot path wrote. Off the hot path only.
"""

from __future__ import annotations

from construct import (
    Bytes,
    Const,
    Int8ub,
    Int16sb,
    Int16ub,
    Int32sb,
    Int32ub,
    Int64sb,
    PascalString,
    PrefixedArray,
    Struct,
    this,
)

from .record import BLANK_MAGIC_CODE, MESSAGE_MAGIC_CODE

HostV4 = Struct("ip" / Bytes(4), "port" / Int32sb)

CommitLogRecord = Struct(
    "total_size" / Int32sb,
    "magic" / Const(MESSAGE_MAGIC_CODE, Int32sb),
    "body_crc" / Int32sb,
    "queue_id" / Int32sb,
    "flag" / Int32sb,
    "queue_offset" / Int64sb,
    "physical_offset" / Int64sb,
    "sys_flag" / Int32sb,
    "born_timestamp" / Int64sb,
    "born_host" / HostV4,
    "store_timestamp" / Int64sb,
    "store_host" / HostV4,
    "reconsume_times" / Int32sb,
    "prepared_transaction_offset" / Int64sb,
    "body_length" / Int32sb,
    "body" / Bytes(this.body_length),
    "topic" / PascalString(Int8ub, "utf8"),
    "properties_length" / Int16sb,
    "properties" / Bytes(this.properties_length),
)

BlankRecord = Struct(
    "total_size" / Int32sb,
    "magic" / Const(BLANK_MAGIC_CODE, Int32sb),
)

ConsumeQueueEntry = Struct(
    "commit_log_offset" / Int64sb,
    "size" / Int32sb,  # negative: the entry is one of an inner batch's offsets
    "tags_code" / Int64sb,
)

IndexHeader = Struct(
    "begin_timestamp" / Int64sb,
    "end_timestamp" / Int64sb,
    "begin_phy_offset" / Int64sb,
    "end_phy_offset" / Int64sb,
    "hash_slot_count" / Int32sb,
    "index_count" / Int32sb,
)

IndexEntry = Struct(
    "key_hash" / Int32sb,
    "phy_offset" / Int64sb,
    "time_diff" / Int32sb,
    "prev_index" / Int32sb,
)

CheckpointFormat = Struct(
    "magic" / Const(b"RPCK"),
    "version" / Int16ub,
    "physic_offset" / Int64sb,
    "dispatched_offset" / Int64sb,
    "index_offset" / Int64sb,
    "verify_from" / Int64sb,
    "timestamp" / Int64sb,
    "queues" / PrefixedArray(Int32sb, Struct(
        "topic" / PascalString(Int8ub, "utf8"),
        "queue_id" / Int32sb,
        "max_offset" / Int64sb,
    )),
    "crc" / Int32ub,
)
