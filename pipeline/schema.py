"""The rows both readers yield, as Spark's DDL and as Arrow, and messages turned into them.

Spark checks a reader's RecordBatches against its schema exactly (int32 for `int`,
`timestamp[us, tz=UTC]`), so the Arrow schema here is the single source of both. A column
that is also a property (tags, keys, the sharding key) is taken out of `properties`.
"""

from __future__ import annotations

import pyarrow as pa

from rocketport.common.message import KEY_SEPARATOR, PROPERTY_KEYS, PROPERTY_TAGS

# The key column travels as RocketMQ 5's sharding-key property: same key, same queue.
PROPERTY_KEY = "__SHARDINGKEY"
_TAKEN = (PROPERTY_TAGS, PROPERTY_KEYS, PROPERTY_KEY)

DDL = ("topic string, queue_id int, offset bigint, key string, value binary, tags string, "
       "keys array<string>, properties map<string,string>, born_timestamp timestamp, "
       "store_timestamp timestamp, msg_id string, reconsume_times int")
COLUMNS = ("topic", "queue_id", "offset", "key", "value", "tags", "keys", "properties",
           "born_timestamp", "store_timestamp", "msg_id", "reconsume_times")

_TS = pa.timestamp("us", tz="UTC")
ARROW_SCHEMA = pa.schema([
    ("topic", pa.string()), ("queue_id", pa.int32()), ("offset", pa.int64()),
    ("key", pa.string()), ("value", pa.binary()), ("tags", pa.string()),
    ("keys", pa.list_(pa.string())), ("properties", pa.map_(pa.string(), pa.string())),
    ("born_timestamp", _TS), ("store_timestamp", _TS), ("msg_id", pa.string()),
    ("reconsume_times", pa.int32())])


class RowBuffer:
    """Columns of messages being gathered into one RecordBatch."""

    __slots__ = ("cols",)

    def __init__(self) -> None:
        self.cols: list[list] = [[] for _ in COLUMNS]

    def __len__(self) -> int:
        return len(self.cols[0])

    def add(self, topic: str, queue_id: int, offset: int, body: bytes,
            props: dict[str, str], born_ms: int, store_ms: int, msg_id: str,
            reconsume_times: int) -> None:
        """One message; `props` is the message's own decoded dict, consumed here."""
        tags = props.pop(PROPERTY_TAGS, None)
        keys = props.pop(PROPERTY_KEYS, None)
        key = props.pop(PROPERTY_KEY, None)
        c = self.cols
        c[0].append(topic)
        c[1].append(queue_id)
        c[2].append(offset)
        c[3].append(key)
        c[4].append(body)
        c[5].append(tags)
        c[6].append([k for k in keys.split(KEY_SEPARATOR) if k] if keys else [])
        c[7].append(list(props.items()))
        c[8].append(born_ms * 1000)
        c[9].append(store_ms * 1000)
        c[10].append(msg_id)
        c[11].append(reconsume_times)

    def take(self) -> pa.RecordBatch:
        """The gathered rows as one RecordBatch; the buffer starts empty again."""
        batch = pa.RecordBatch.from_arrays(
            [pa.array(col, type=f.type) for col, f in zip(self.cols, ARROW_SCHEMA)],
            schema=ARROW_SCHEMA)
        self.cols = [[] for _ in COLUMNS]
        return batch
