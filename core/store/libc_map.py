"""Map a file through libc mmap, keeping no file descriptor for the mapping's life.

Python 3.11's ``mmap.mmap`` dups the descriptor it is given and holds it until the mapping
is closed (``trackfd=False`` is 3.13+), so every mapped segment (a ConsumeQueue per queue)
cost one descriptor and a broker with many queues met EMFILE. A mapping made by libc
outlives its descriptor: the file is opened, mapped and closed at once.

The mapping is a ctypes ``c_char`` array over the mapped address: it exports the buffer
protocol (memoryview, ``c_char.from_buffer``), slices to bytes as ``mmap`` does, and is
unmapped when the array is freed. Every memoryview or ctypes export holds the array, so a
reader's slice keeps the pages mapped however long it lives (what ``mmap.close``'s
BufferError protected before); ``MappedFile.close`` only drops its own references.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import mmap
import os
from typing import Any

_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
_mmap = _libc.mmap
_mmap.restype = ctypes.c_void_p
_mmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                  ctypes.c_long)
_munmap = _libc.munmap
_munmap.restype = ctypes.c_int
_munmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t)
_msync = _libc.msync
_msync.restype = ctypes.c_int
_msync.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
MAP_FAILED = ctypes.c_void_p(-1).value
MS_SYNC = 4  # Linux
_syncfs = _libc.syncfs
_syncfs.restype = ctypes.c_int
_syncfs.argtypes = (ctypes.c_int,)
_madvise = _libc.madvise
_madvise.restype = ctypes.c_int
_madvise.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)

_types: dict[int, type] = {}


class Closed:
    """Stands for a mapping after its owner let go of it (``closed`` as mmap's)."""

    __slots__ = ()
    closed = True

    def __len__(self) -> int:
        return 0


CLOSED = Closed()


def _mapping_type(size: int) -> Any:
    """The array type of ``size`` bytes that unmaps itself when freed (one per size)."""
    kind = _types.get(size)
    if kind is None:
        def __del__(self: Any, _unmap: Any = _munmap, _addr: Any = ctypes.addressof) -> None:
            _unmap(_addr(self), size)

        kind = type(f"Mapping{size}", (ctypes.c_char * size,),
                    {"__del__": __del__, "closed": False})
        _types[size] = kind
    return kind


def map_file(fd: int, size: int) -> Any:
    """A shared read-write mapping of [0, size) of ``fd``; the caller may close ``fd`` at
    once. OSError (ENOMEM when the process has too many mappings) if it cannot be made."""
    addr = _mmap(None, size, mmap.PROT_READ | mmap.PROT_WRITE, mmap.MAP_SHARED, fd, 0)
    if addr is None or addr == MAP_FAILED:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    return _mapping_type(size).from_address(addr)


def sync_mapping(mapping: Any) -> None:
    """msync(MS_SYNC) of the whole mapping: its dirty pages written and waited for, as
    fdatasync of the file (Linux: vfs_fsync_range, datasync) but with no descriptor to
    open, so a flush still works when the process is out of them. Blocking: a worker
    thread's call (ctypes releases the GIL); the caller's reference keeps it mapped."""
    if _msync(ctypes.addressof(mapping), len(mapping), MS_SYNC) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


def sync_file_system(path: str) -> None:
    """syncfs(2) of the file system holding ``path``: every dirty page of it written and
    waited for in one call and one journal commit, where an fdatasync per file costs a
    commit each (20,000 new ConsumeQueue files: 13 s of msync a flush). Blocking."""
    fd = os.open(path, os.O_RDONLY)
    try:
        if _syncfs(fd) != 0:
            err = ctypes.get_errno()
            raise OSError(err, os.strerror(err))
    finally:
        os.close(fd)


def advise_random(mapping: Any) -> None:
    """MADV_RANDOM: no readahead on its faults. A ConsumeQueue read faults its page in,
    and readahead would bring up to 128 KiB of it (zeros past the data) into the page
    cache, which fault-around then maps: ~500 MB of RSS over 16,384 mapped queues, where
    one page each is what they hold. Advice only: a failure is ignored."""
    _madvise(ctypes.addressof(mapping), len(mapping), mmap.MADV_RANDOM)
