"""Keep a Spark worker's freed heap for its next batch (glibc's malloc only).

Each RecordBatch a read makes passes through a few large temporary buffers (the joined
pull bodies, numpy's per-record arrays). glibc serves blocks over its mmap threshold with
fresh mappings and returns them at free, and trims the heap's top once it holds more than
its trim threshold, so every batch faulted its pages in again: about 100 page faults per
1,000 rows, 0.1-0.3 µs of kernel time a row (spark_bench's worker_read at load 7). Raising
both thresholds once per process makes those buffers reuse the same heap. A worker then
keeps up to `TRIM_THRESHOLD` of freed memory. Elsewhere than glibc this does nothing.
"""

from __future__ import annotations

import ctypes

M_TRIM_THRESHOLD = -1  # glibc's mallopt parameters (malloc.h)
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 32 << 20  # blocks below this come from the heap
TRIM_THRESHOLD = 64 << 20  # freed heap kept before any is returned to the kernel

_kept: bool | None = None


def keep_freed_heap() -> bool:
    """Set the thresholds (once per process); whether this malloc took them."""
    global _kept
    if _kept is None:
        try:
            mallopt = ctypes.CDLL("libc.so.6").mallopt
        except (OSError, AttributeError):
            _kept = False
        else:
            _kept = bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD))
    return _kept
