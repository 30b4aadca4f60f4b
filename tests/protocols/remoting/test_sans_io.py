"""The codec stays sans-IO: no module of the package imports asyncio or sockets."""

from __future__ import annotations

import ast
from pathlib import Path

import rocketport.protocols.remoting as package

FORBIDDEN = {"asyncio", "socket", "selectors", "trio", "uvloop"}
# The front-end's I/O side lives beside the codec; every other module must stay sans-IO.
IO_MODULES = {"session", "client", "handlers", "namesrv", "frontend"}


def test_no_module_imports_io() -> None:
    for path in Path(package.__file__).parent.glob("*.py"):
        if path.stem in IO_MODULES:
            continue
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            else:
                continue
            for name in names:
                assert name.split(".")[0] not in FORBIDDEN, f"{path.name} imports {name}"
