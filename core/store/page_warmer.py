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
"""

from __future__ import annotations

import ctypes
import ctypes.util
import mmap
import threading

MADV_POPULATE_WRITE = 23
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
                self._mm, self._anchor = mm, ctypes.c_char.from_buffer(mm)
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
        while True:
            with self._cond:
                while not self._stopped and self._done >= self._target:
                    self._cond.wait()
                if self._stopped:
                    return
                anchor, start = self._anchor, self._done
                assert anchor is not None  # a target is set only with a mapping to warm
                length = min(self.chunk, self._target - start)
                self._done = start + length
            if _madvise(ctypes.addressof(anchor) + start, length, MADV_POPULATE_WRITE) != 0:
                self.enabled = False  # old kernel or unsupported mapping: stay out of the way
                return
