"""Fixtures for the messaging-semantics tests: a small broker with short delay levels."""

from __future__ import annotations

import pytest

from rocketport.core.config import BrokerConfig


@pytest.fixture
def sem_config(tmp_path) -> BrokerConfig:
    """Short delay levels and transaction timings so every wait in a test is bounded."""
    return BrokerConfig(
        store_path_root_dir=str(tmp_path / "store"),
        mapped_file_size_commit_log=1 << 20,
        mapped_file_size_consume_queue=20 * 1024,
        max_hash_slot_num=256,
        max_index_num=4096,
        flush_interval_commit_log=20,
        flush_interval_consume_queue=50,
        message_delay_level="1s 2s 3s",
        flush_delay_offset_interval=50,
        transaction_time_out=200,
        transaction_check_interval=100,
        transaction_check_max=3,
    )
