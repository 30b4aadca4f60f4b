"""Node.js clients for the tests: a package.json installed with npm into a test directory."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest


def npm_install(package_dir: Path, into: Path, what: str) -> Path:
    """``package_dir``'s package.json installed under ``into``; its node_modules (for NODE_PATH).
    Fails the test (does not skip it) when node or npm is missing: the set-up installs them."""
    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.fail(f"node and npm are needed for the {what} tests")
    shutil.copy(package_dir / "package.json", into / "package.json")
    subprocess.run(["npm", "install", "--no-audit", "--no-fund", "--prefix", str(into)],
                   check=True, timeout=300, capture_output=True)
    return into / "node_modules"
