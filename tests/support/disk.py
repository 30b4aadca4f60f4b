"""Full disks for the tests: simulated (posix_fallocate, how the store backs every file,
fails with ENOSPC while ``full`` is set, in every thread), or real (a small tmpfs, filled).

`fill_filesystem` is also imported by test children (scripts run with ``python -c``), so
this module needs nothing but the standard library and pytest.
"""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = str(Path(__file__).resolve().parents[2])  # what children put on sys.path


def fill_filesystem(root: str | os.PathLike, filler: str = "filler") -> None:
    """Take what is free on ``root``'s file system until nothing is: a broker thread (index
    builder, preparer) may allocate between statvfs and posix_fallocate, so look again."""
    fd = os.open(os.path.join(root, filler), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        for _ in range(100):
            st = os.statvfs(root)
            if st.f_bavail == 0:
                break
            try:
                os.posix_fallocate(fd, os.fstat(fd).st_size, st.f_bavail * st.f_frsize)
            except OSError as exc:
                if exc.errno != errno.ENOSPC:  # ENOSPC: taken since statvfs, look again
                    raise
    finally:
        os.close(fd)


@contextlib.contextmanager
def mounted_tmpfs(path: Path, size: str = "8m") -> Iterator[Path]:
    """A real small file system (root can mount one; elsewhere the test is skipped, and the
    simulated disk covers the same behaviour)."""
    path.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
                          capture_output=True, text=True, timeout=30)
    if done.returncode:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield path
    finally:
        if subprocess.run(["umount", str(path)], capture_output=True, timeout=30).returncode:
            subprocess.run(["umount", "-l", str(path)], capture_output=True, timeout=30)


class SimulatedFullDisk:
    """Records each posix_fallocate as (thread name, offset, length); ``full`` makes every
    one fail with ENOSPC, ``fail_above`` the longer ones (a disk with that much room left).
    Writes (os.pwrite: how ConsumeQueue files are backed, with zeros) fail the same way."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.full = False
        self.fail_above: int | None = None
        self.refused = 0
        self.calls: list[tuple[str, int, int]] = []
        real = os.posix_fallocate

        def fallocate(fd: int, offset: int, length: int) -> None:
            self.calls.append((threading.current_thread().name, offset, length))
            if self.full or (self.fail_above is not None and length > self.fail_above):
                self.refused += 1
                raise OSError(errno.ENOSPC, "No space left on device")
            real(fd, offset, length)

        monkeypatch.setattr(os, "posix_fallocate", fallocate)
        real_pwrite = os.pwrite

        def pwrite(fd: int, data: bytes, offset: int) -> int:
            if self.full or (self.fail_above is not None and len(data) > self.fail_above):
                self.refused += 1
                raise OSError(errno.ENOSPC, "No space left on device")
            return real_pwrite(fd, data, offset)

        monkeypatch.setattr(os, "pwrite", pwrite)
