"""The epoch file and where a returning node cuts its log (core/ha/epoch_file.py)."""

from __future__ import annotations

from rocketport.core.ha.epoch_file import EpochEntry, EpochFile, truncate_point

HISTORY = [EpochEntry(1, 0, 1), EpochEntry(2, 5000, 2), EpochEntry(3, 9000, 1)]


def test_an_old_master_cuts_at_the_start_of_the_first_epoch_it_never_followed():
    # led epoch 1 up to 6000; epoch 2's master began at 5000: 1000 bytes only it had
    assert truncate_point(1, HISTORY, 6000) == 5000
    # followed epoch 2 to 9500: epoch 3's master began at 9000
    assert truncate_point(2, HISTORY, 9500) == 9000


def test_a_log_behind_the_next_epochs_start_or_in_the_newest_epoch_is_not_cut():
    assert truncate_point(1, HISTORY, 4000) is None  # behind: it just catches up
    assert truncate_point(1, HISTORY, 5000) is None
    assert truncate_point(3, HISTORY, 20_000) is None  # it follows the newest epoch already
    assert truncate_point(0, [], 1000) is None  # no election yet


def test_entries_survive_a_reload_and_never_go_back(tmp_path):
    epochs = EpochFile(str(tmp_path))
    assert epochs.load() == [] and epochs.last_epoch == 0
    for entry in HISTORY:
        epochs.append(entry)
    epochs.append(EpochEntry(2, 1, 1))  # older than the last: ignored
    again = EpochFile(str(tmp_path))
    assert again.load() == HISTORY and again.last_epoch == 3
