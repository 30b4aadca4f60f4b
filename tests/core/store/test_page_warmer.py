"""The CommitLog keeps the pages ahead of its write position mapped (warmMapedFileEnable)."""

import ctypes
import mmap
import time

import pytest

from rocketport.core.store.commitlog import CommitLog
from rocketport.core.store.page_warmer import LEAD

SEGMENT = 64 << 20


def mapped_bytes(mm: mmap.mmap) -> int:
    """Rss of the mapping: bytes whose page-table entries exist (from /proc/self/smaps)."""
    anchor = ctypes.c_char.from_buffer(mm)
    start = ctypes.addressof(anchor)
    del anchor
    inside = False
    with open("/proc/self/smaps") as f:
        for line in f:
            head = line.split()[0]
            if "-" in head and not head.endswith(":"):
                inside = int(head.split("-")[0], 16) == start
            elif inside and head == "Rss:":
                return int(line.split()[1]) * 1024
    raise AssertionError("mapping not found in smaps")


def wait_mapped(mm: mmap.mmap, at_least: int, seconds: float = 5.0) -> int:
    deadline = time.monotonic() + seconds
    while (n := mapped_bytes(mm)) < at_least and time.monotonic() < deadline:
        time.sleep(0.01)
    return n


@pytest.mark.parametrize("warm", [True, False])
def test_pages_ahead_of_the_writer_are_faulted_in_only_when_enabled(tmp_path, warm):
    cl = CommitLog(str(tmp_path), SEGMENT, warm=warm)
    try:
        mf = cl.reserve(100)
        mf.write(b"\x01" * 100)
        if warm:
            assert wait_mapped(mf.mm, LEAD) >= LEAD
            # the window moves with the writer and ends LEAD ahead of it
            mf.wrote_position = 20 << 20
            cl.reserve(100)
            assert wait_mapped(mf.mm, (20 << 20) + LEAD) >= (20 << 20) + LEAD
            time.sleep(0.1)
            assert mapped_bytes(mf.mm) <= (20 << 20) + LEAD
        else:
            time.sleep(0.2)
            assert mapped_bytes(mf.mm) < 1 << 20
        assert mf.view[100:] == bytes(SEGMENT - 100)  # warming never writes
    finally:
        cl.close()
    assert mf.mm.closed  # the warmer let go of the mapping


def vma_flags(mm: mmap.mmap) -> list[tuple[int, int, bool]]:
    """(start, end, random-read) of each VMA of the mapping, as offsets into it
    (/proc/self/smaps: ``rr`` in VmFlags is MADV_RANDOM)."""
    anchor = ctypes.c_char.from_buffer(mm)
    base = ctypes.addressof(anchor)
    del anchor
    vmas, current = [], None
    with open("/proc/self/smaps") as f:
        for line in f:
            head = line.split()[0]
            if "-" in head and not head.endswith(":"):
                lo, hi = (int(x, 16) for x in head.split("-"))
                current = (lo - base, hi - base) if base <= lo < base + len(mm) else None
            elif current is not None and head == "VmFlags:":
                vmas.append((*current, "rr" in line.split()[1:]))
    return sorted(vmas)


def test_warmed_pages_keep_readahead_and_the_tail_ahead_has_none(tmp_path):
    """The warmer populates small folios (the part ahead MADV_RANDOM: no readahead's large
    folios), and gives every chunk it warmed its readahead back: a later read of an evicted
    page of the log is not page by page."""
    cl = CommitLog(str(tmp_path), SEGMENT, warm=True)
    try:
        mf = cl.reserve(100)
        mf.write(b"\x01" * 100)
        assert wait_mapped(mf.mm, LEAD) >= LEAD
        deadline = time.monotonic() + 5
        while (vmas := vma_flags(mf.mm)) and vmas[0][1] < LEAD and time.monotonic() < deadline:
            time.sleep(0.01)  # the last chunk's MADV_NORMAL follows its populate
        assert vmas[0] == (0, vmas[0][1], False) and vmas[0][1] >= LEAD  # warmed: readahead
        assert vmas[-1][1] == SEGMENT and vmas[-1][2]  # not warmed yet: random
        assert all(end <= LEAD or rr for _, end, rr in vmas[1:])
    finally:
        cl.close()
