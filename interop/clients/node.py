"""The Node.js clients: interop/node (package.json + package-lock.json) installed with `npm ci`
into .cache/interop-node once (again when the lock file changes); drivers run with node."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

from ..base import Missing
from .driver import CACHE, DriverClient

FOLDER = Path(__file__).resolve().parents[1] / "node"
INSTALL = CACHE / "interop-node"


def install() -> Path:
    """node_modules with the locked versions (idempotent: skipped when the lock is unchanged)."""
    if shutil.which("node") is None or shutil.which("npm") is None:
        raise Missing("node and npm are not installed")
    lock = (FOLDER / "package-lock.json").read_bytes()
    stamp = INSTALL / ".installed-lock"
    if not (stamp.exists() and stamp.read_bytes() == lock):
        INSTALL.mkdir(parents=True, exist_ok=True)
        for name in ("package.json", "package-lock.json"):
            shutil.copy(FOLDER / name, INSTALL / name)
        proc = subprocess.run(["npm", "ci", "--no-audit", "--no-fund"], cwd=INSTALL,
                              capture_output=True, text=True, timeout=600)
        if proc.returncode != 0:
            raise Missing(f"npm ci failed: {proc.stderr.strip()[-300:]}")
        stamp.write_bytes(lock)
    return INSTALL / "node_modules"


class NodeClient(DriverClient):
    package = ""  # the npm package the driver runs
    script = ""  # its driver in interop/node

    def check(self) -> None:
        install()

    def version(self) -> str:
        meta = INSTALL / "node_modules" / self.package / "package.json"
        return json.loads(meta.read_text())["version"]

    def command(self) -> list[str]:
        return ["node", str(FOLDER / self.script)]

    def env(self) -> dict[str, str]:
        return dict(os.environ, NODE_PATH=str(INSTALL / "node_modules"))
