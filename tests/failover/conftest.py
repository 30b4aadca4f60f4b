from __future__ import annotations

import pytest

from tests.ha.conftest import namesrv  # noqa: F401 - the HA tests' name server, for these tests too
from tests.support.etcd import etcd_cluster


@pytest.fixture
def etcd(tmp_path):
    """One private etcd node; its ``endpoints`` go into ``etcdEndpoints``."""
    cluster = etcd_cluster(tmp_path / "etcd")
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()

