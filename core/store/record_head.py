"""A stored record's fixed head (RocketMQ's layout, core/store/record.py) as a numpy record
type, for readers that take many records' fields at once as columns: the slave's block
dispatch (core/store/replica_block.py) and the pipeline's pull decoding
(pipeline/columns.py). The offsets from ``store_ts`` on hold for records whose born and
store hosts are IPv4 (sys_flag without BORNHOST_V6_FLAG / STOREHOSTADDRESS_V6_FLAG): each
IPv6 host moves what follows it by 12 bytes."""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from .record import HEADER_SIZE


@lru_cache(maxsize=64)
def record_head(itemsize: int = HEADER_SIZE) -> np.dtype:
    """The fixed fields as one numpy record of ``itemsize`` bytes: HEADER_SIZE for heads
    gathered one per row, a record's size to read records of one size in place."""
    return np.dtype({"names": ["total", "magic", "queue_id", "queue_offset", "phys", "sys_flag",
                               "born_ts", "store_ts", "reconsume", "body_len"],
                     "formats": [">i4", ">i4", ">i4", ">i8", ">i8", ">i4", ">i8", ">i8", ">i4", ">i4"],
                     "offsets": [0, 4, 12, 20, 28, 36, 40, 56, 72, 84], "itemsize": itemsize})
