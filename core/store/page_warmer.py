"""PageWarmer: faults in the pages just ahead of a log's write position from a worker thread.

A fresh page of a mapped segment costs a page fault, a zeroed page-cache page and, on a
virtual machine, often a trip to the hypervisor: microseconds per 4 KiB, paid on the event
loop by the memcpy that first touches it. RocketMQ pre-touches whole segments
(warmMapedFileEnable); we keep a window of a few MiB ahead of the writer populated with
madvise(MADV_POPULATE_WRITE), which faults pages in without writing to them, so it cannot
race with the writer. The call goes through ctypes, which drops the GIL for its duration.
Where the kernel lacks MADV_POPULATE_WRITE (before Linux 5.14) the warmer turns itself off.
Populated pages of a shared file mapping are dirty: a flush before the writer reaches them
writes them as zeros, at most one extra write of each page. The window never goes past the
file's backed end (see mapped_file): populating a page that has no disk block would need
one, and on a full disk fail.

The pages ahead of the writer are populated one small folio at a time: the mapping's part
not yet warmed is MADV_RANDOM, and each chunk goes back to MADV_NORMAL once populated (so a
later read of it, evicted, gets readahead again). Populating a fallocated extent through a
normal mapping goes through readahead, which makes large folios and zeroes them; on a VM
whose balloon reports free memory to its host (free page reporting: the host takes back
free high-order blocks), those blocks come back one host fault a page, and the same 400 MB
cost 0.07 s of system time when the kernel reused blocks just freed and 1.1 s when it did
not, on the broker's own core (r7: the swing of bench/replication_bench.py's Kafka rows).
Small folios cost 0.25-0.29 s every time: where no host takes free memory back (bare
metal), that is 0.2 s per 400 MB more than large folios reused warm, the price of never
paying the 1.1 s.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import mmap
import threading

MADV_NORMAL, MADV_RANDOM, MADV_POPULATE_WRITE = 0, 1, 23
CHUNK = 1 << 20
LEAD = 8 << 20

_libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
_madvise = _libc.madvise
_madvise.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
_madvise.restype = ctypes.c_int


class PageWarmer:
    """One daemon thread; ``advance`` (event loop) only moves a target and wakes it.

    The warmer holds an export of the mapping it works on (a ctypes view of it), so the
    mapping cannot be unmapped under a running madvise: MappedFile.close leaves a mapping
    with live exports to be unmapped when the last one goes.
    """

    def __init__(self, lead: int = LEAD, chunk: int = CHUNK) -> None:
        self.lead = lead
        self.chunk = chunk
        self.enabled = True
        self._cond = threading.Condition()
        self._anchor: ctypes.c_char | None = None  # export of the mapping being warmed
        self._mm: mmap.mmap | None = None
        self._size = 0  # its length
        self._generation = 0  # counts the mappings handed to the warmer
        self._done = 0       # warm up to here (bytes from the mapping's start)
        self._target = 0
        self._thread: threading.Thread | None = None
        self._stopped = False

    def advance(self, mm: mmap.mmap, position: int, limit: int | None = None) -> int:
        """Ask for [position, position + lead) of ``mm`` to be warm, never past ``limit``
        (the file's backed end); returns the position at which to call again (the caller
        compares on its hot path)."""
        if not self.enabled or self._stopped:
            return 1 << 62
        with self._cond:
            if mm is not self._mm:
                self._mm, self._anchor, self._size = mm, ctypes.c_char.from_buffer(mm), len(mm)
                self._generation += 1
                self._done = position - position % mmap.PAGESIZE
            end = position + self.lead
            end = min(end + -end % mmap.PAGESIZE, len(mm))  # madvise wants whole pages
            if limit is not None:
                end = min(end, limit - limit % mmap.PAGESIZE)  # whole pages, all backed
            self._target = end
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="page-warmer", daemon=True)
                self._thread.start()
            self._cond.notify()
        return position + self.chunk

    def stop(self) -> None:
        """Stop the thread and drop the export (call before the mappings are closed)."""
        with self._cond:
            self._stopped = True
            self._cond.notify()
        if self._thread is not None:
            self._thread.join()
        self._mm = self._anchor = None

    def _run(self) -> None:
        marked = 0  # the generation of the mapping whose tail is MADV_RANDOM
        while True:
            with self._cond:
                while not self._stopped and self._done >= self._target:
                    self._cond.wait()
                if self._stopped:
                    return
                anchor, start, size, generation = self._anchor, self._done, self._size, self._generation
                assert anchor is not None  # a target is set only with a mapping to warm
                length = min(self.chunk, self._target - start)
                self._done = start + length
            base = ctypes.addressof(anchor)
            if generation != marked:  # a new mapping: small folios from here to its end
                marked = generation
                _madvise(base + start, size - start, MADV_RANDOM)  # failing: only slower
            if _madvise(base + start, length, MADV_POPULATE_WRITE) != 0:
                self.enabled = False  # old kernel or unsupported mapping: stay out of the way
                return
            _madvise(base + start, length, MADV_NORMAL)
