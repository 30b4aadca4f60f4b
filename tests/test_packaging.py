"""A non-editable install (`pip install .`, the README's start command) ships only the
packages pyproject lists: a new subpackage left off the list imports in the editable
tree and fails on a user's machine."""
from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_every_package_in_the_tree_is_listed_in_pyproject() -> None:
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(setuptools["packages"])
    in_tree = set()
    for name, directory in setuptools["package-dir"].items():
        for init in (ROOT / directory).rglob("__init__.py"):
            relative = init.parent.relative_to(ROOT / directory)
            in_tree.add(".".join((name, *relative.parts)))
    assert in_tree - listed == set()
    assert listed - in_tree == set()
