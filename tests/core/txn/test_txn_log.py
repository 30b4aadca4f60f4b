"""The coordinator log's file: lines through a memory map, replayed up to the zeros after
them, a torn last line skipped and ended, growth past the first mapping, a rewrite."""

from __future__ import annotations

from rocketport.core.txn.log import CoordinatorLog


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
