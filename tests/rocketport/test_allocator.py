"""Large buffers reuse heap pages after tune_malloc (glibc): no page faults per request."""

from __future__ import annotations

import subprocess
import sys

import pytest

SCRIPT = """
import resource, sys
from rocketport.allocator import tune_malloc
tuned = tune_malloc() if sys.argv[1] == "tune" else False
data = bytes(1 << 20)
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(50):  # a 1 MiB request received as two reads, joined, then dropped
    reads = [data[: 1 << 19], data[1 << 19 :]]
    frame = b"".join(reads)
    del reads, frame
print(tuned, resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def faults(mode: str) -> tuple[bool, int]:
    out = subprocess.run([sys.executable, "-c", SCRIPT, mode], capture_output=True, text=True,
                         timeout=60, check=True).stdout.split()
    return out[0] == "True", int(out[1])


def test_joined_megabyte_frames_stop_faulting_once_tuned():
    tuned, tuned_faults = faults("tune")
    if not tuned:
        pytest.skip("not glibc: the C library has no mallopt to tune")
    _, default_faults = faults("default")
    # by default each frame is a fresh mapping (~480 faults per 2 MiB of buffers); tuned, the
    # heap grows once (~2 MiB of first touches) and is reused
    assert default_faults > 50 * 200
    assert tuned_faults < 2000
