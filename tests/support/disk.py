"""A full disk, simulated: posix_fallocate (how the store backs every file) fails with
ENOSPC while ``full`` is set, in every thread (the loop's and the segment preparer's)."""

from __future__ import annotations

import errno
import os

import pytest


class SimulatedFullDisk:
    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.full = False
        self.refused = 0
        real = os.posix_fallocate

        def fallocate(fd: int, offset: int, length: int) -> None:
            if self.full:
                self.refused += 1
                raise OSError(errno.ENOSPC, "No space left on device")
            real(fd, offset, length)

        monkeypatch.setattr(os, "posix_fallocate", fallocate)
