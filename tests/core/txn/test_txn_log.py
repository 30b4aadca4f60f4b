"""The coordinator log's file: lines through a memory map, replayed up to the zeros after
them, a torn last line skipped and ended, growth past the first mapping, a rewrite, a full
disk."""

from __future__ import annotations

import subprocess
import sys

from rocketport.core.txn.log import CoordinatorLog
from tests.support.disk import REPO, mounted_tmpfs


def test_lines_survive_a_torn_line_growth_and_a_rewrite(tmp_path):
    path = str(tmp_path / "transactions.log")
    first = CoordinatorLog(path, sync=False)
    assert first.replay() == []
    first.open()
    first.append({"id": "a", "n": 0})
    # lines are in the file at once, without close (a SIGKILL would leave them): another
    # reader sees them, and the zeros after them are not read as lines
    assert CoordinatorLog(path, sync=False).replay() == [{"id": "a", "n": 0}]
    first.close()
    with open(path, "r+b") as f:  # a copy cut short by a crash, zeros after it
        f.seek(len(b'{"id":"a","n":0}\n'))
        f.write(b'{"id":"b","n"')

    second = CoordinatorLog(path, sync=False)
    assert second.replay() == [{"id": "a", "n": 0}]  # the torn line is skipped
    second.open()
    big = "x" * 1000
    for n in range(1, 3001):  # about 3 MB: past the first 1 MiB mapping, twice
        second.append({"id": "a", "n": n, "pad": big})
    second.close()
    third = CoordinatorLog(path, sync=False)
    records = third.replay()
    assert [r["n"] for r in records] == list(range(3001))  # the line after the torn one too
    third.open()
    third.rewrite([{"id": "a", "n": 3000}])
    third.append({"id": "a", "n": 3001})
    third.close()
    assert CoordinatorLog(path, sync=False).replay() == [{"id": "a", "n": 3000}, {"id": "a", "n": 3001}]


_FULL_DISK_CHILD = r"""
import errno, sys
sys.path.insert(0, sys.argv[2])
from rocketport.core.txn.log import CoordinatorLog
from tests.support.disk import fill_filesystem
log = CoordinatorLog(sys.argv[1] + "/transactions.log", sync=False)
log.open()
fill_filesystem(sys.argv[1])
written = 0
try:
    for n in range(5000):  # about 5 MB of lines: past the first mapping on a full disk
        log.append({"id": "a", "n": n, "pad": "x" * 1000})
        written = n + 1
except OSError as exc:
    assert exc.errno == errno.ENOSPC, exc
    log.close()
    assert [r["n"] for r in CoordinatorLog(log.path, sync=False).replay()] == list(range(written))
    print("refused after", written)
    sys.exit(0)
sys.exit("every line was written on a full disk")
"""


def test_a_full_disk_refuses_a_line_instead_of_killing_the_broker(tmp_path):
    """Every page of the mapped file has its disk block before a line is copied in: on a
    full disk the append that needs more room raises ENOSPC (the request fails, the lines
    before it stay), where a page without a block would be SIGBUS at the copy."""
    with mounted_tmpfs(tmp_path / "disk") as mount_point:
        done = subprocess.run([sys.executable, "-c", _FULL_DISK_CHILD, str(mount_point), REPO],
                              capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, f"exit {done.returncode} (-7: SIGBUS): {done.stderr[-2000:]}"
    assert "refused after" in done.stdout
