from __future__ import annotations

import pytest

from tests.ha.cluster import start_namesrv
from tests.support.processes import stop


@pytest.fixture
def namesrv(tmp_path):
    proc, addr = start_namesrv(tmp_path)
    try:
        yield addr
    finally:
        stop(proc)
