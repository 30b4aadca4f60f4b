"""The core type-checks: mypy over rocketport.core (and rocketport.common, which it imports).

The packages install from folders of other names (core/ is rocketport.core), so the check
runs over a tree of links shaped as they are installed, in a temporary folder."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_mypy_finds_no_error_in_the_core(tmp_path):
    package = tmp_path / "tree" / "rocketport"
    package.mkdir(parents=True)
    for source in (REPO / "rocketport").glob("*.py"):
        (package / source.name).symlink_to(source)
    for folder in ("core", "common"):
        (package / folder).symlink_to(REPO / folder, target_is_directory=True)
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "-p", "rocketport.core", "-p", "rocketport.common",
         "--cache-dir", str(tmp_path / "cache"), "--ignore-missing-imports"],
        env={**os.environ, "MYPYPATH": str(tmp_path / "tree")}, cwd=tmp_path,
        capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
