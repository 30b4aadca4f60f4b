"""The PyPI `rocketmq` 0.4.4 client (C++ client 1.x) has no TLS option (its library links no
TLS code); with `tls.server.mode: permissive` it keeps working in plaintext on the port TLS
clients use."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

CLIENT = Path(__file__).parents[2] / "interop" / "rocketmq_py" / "client.py"


def _produce(home: Path, namesrv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(CLIENT), "produce", namesrv, "CppTopic", "3"],
                          env=dict(os.environ, HOME=str(home)), timeout=90, capture_output=True, text=True)


def test_the_cpp_client_sends_in_plaintext_to_a_permissive_broker(tls_broker, tmp_path):
    proc = _produce(tmp_path, tls_broker.namesrv)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert tls_broker.run(tls_broker.server.broker.max_offset, "CppTopic", 0) + \
        sum(tls_broker.run(tls_broker.server.broker.max_offset, "CppTopic", q) for q in range(1, 4)) >= 3
