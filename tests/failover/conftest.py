from __future__ import annotations

import pytest

from tests.ha.cluster import start_namesrv
from tests.support.etcd import etcd_cluster
from tests.support.processes import stop


@pytest.fixture
def etcd(tmp_path):
    """One private etcd node; its ``endpoints`` go into ``etcdEndpoints``."""
    cluster = etcd_cluster(tmp_path / "etcd")
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def namesrv(tmp_path):
    proc, addr = start_namesrv(tmp_path)
    try:
        yield addr
    finally:
        stop(proc)
