"""One broker per store: an exclusive lock on ``{storePathRootDir}/lock``, held for the
process's life (RocketMQ's DefaultMessageStore locks the same file).

Two brokers on one store would both acknowledge writes while each one's checkpoint and
abort marker overwrote the other's, so acknowledged messages would vanish at the next
start. ``flock`` locks die with their process, so a SIGKILLed broker never leaves a stale
lock behind. The file holds the holder's pid, only to name it in the error; the lock, not
the pid, decides. Never delete the file: a broker holding an unlinked file's lock would
not stop a second one from creating and locking a new one.
"""

from __future__ import annotations

import fcntl
import os

from ..errors import StoreLocked

LOCK_FILE = "lock"


class StoreLock:
    def __init__(self, root: str) -> None:
        self.path = os.path.join(root, LOCK_FILE)
        self._fd: int | None = None

    def acquire(self) -> None:
        """Take the lock or raise StoreLocked naming the holder; idempotent."""
        if self._fd is not None:
            return
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_pid(fd)
            os.close(fd)
            raise StoreLocked(os.path.dirname(self.path), holder) from None
        except BaseException:
            os.close(fd)
            raise
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the last descriptor drops the flock
            self._fd = None

    @property
    def held(self) -> bool:
        return self._fd is not None


def holder_pid(root: str) -> int | None:
    """The pid of the live process holding ``root``'s lock, or None when nobody holds it.

    For read-only tools: tests the lock with a shared, non-blocking request and lets go at
    once, so it never stands in a starting broker's way for longer than the test.
    """
    path = os.path.join(root, LOCK_FILE)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return _read_pid(fd) or -1
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


def _read_pid(fd: int) -> int | None:
    try:
        return int(os.pread(fd, 32, 0).split()[0])
    except (OSError, ValueError, IndexError):
        return None
