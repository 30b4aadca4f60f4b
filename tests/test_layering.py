"""The layers of docs/architecture.md, enforced: an AST walk over every module's imports.

- core imports no protocol, client, pipeline or shell module;
- common (what client and broker share) imports nothing else of Rocketport;
- a protocol imports only the facade's public modules (core.broker, core.errors,
  core.config, core.facade.* and core.auth), common, the seam's shared modules and its own
  package; never another protocol (the registry, part of the seam, names them all);
- client imports common and the remoting codec, never the broker's core;
- the shell (rocketport/) may import everything; the pipeline uses the client, common and
  the remoting codec (its reader pulls raw records), and its offline store reader the core.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
# folder on disk -> package it installs as
PACKAGES = {"core": "rocketport.core", "common": "rocketport.common", "protocols": "rocketport.protocols",
            "client": "rocketport.client", "pipeline": "rocketport.pipeline", "rocketport": "rocketport"}
SHELL = "rocketport"
# the core's public face: the Broker, its typed errors and config, the facade's role and type
# modules, and the account/permission checks every protocol's login uses
FACADE = ("rocketport.core.broker", "rocketport.core.errors", "rocketport.core.config", "rocketport.core.facade",
          "rocketport.core.auth")


def _module_name(path: Path) -> str:
    folder, *rest = path.relative_to(REPO).with_suffix("").parts
    parts = [PACKAGES[folder], *rest]
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path) -> list[tuple[int, str]]:
    """Every Rocketport module ``path`` imports (absolute names), with its line."""
    module = _module_name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - node.level + 1]
                name = ".".join(base + ([node.module] if node.module else []))
            else:
                name = node.module or ""
            found.append((node.lineno, name))
            # "from package import module" imports that module too
            found += [(node.lineno, f"{name}.{alias.name}") for alias in node.names
                      if _is_module(f"{name}.{alias.name}")]
    return [(line, name) for line, name in found if name == "rocketport" or name.startswith("rocketport.")]


def _is_module(name: str) -> bool:
    folders = {package: folder for folder, package in PACKAGES.items()}
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        folder = folders.get(".".join(parts[:cut]))
        if folder:
            path = REPO.joinpath(folder, *parts[cut:])
            return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()
    return False


def _within(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def _protocol_of(name: str) -> str | None:
    parts = name.split(".")
    return parts[2] if len(parts) > 2 and parts[1] == "protocols" and not parts[2].endswith("_base") else None


SHARED_PROTOCOL_MODULES = ("rocketport.protocols.frontend", "rocketport.protocols.registry",
                           "rocketport.protocols.session_base", "rocketport.protocols.listener",
                           "rocketport.protocols.eager", "rocketport.protocols.tls",
                           "rocketport.protocols.histogram")


def _violation(module: str, imported: str) -> str | None:
    """Why ``module`` may not import ``imported``, or None."""
    if imported.startswith("rocketport.") and imported.split(".")[1] in ("core", "common", "protocols",
                                                                        "client", "pipeline"):
        layer = imported.split(".")[1]
    else:
        layer = SHELL
    if module.startswith("rocketport.core"):
        if layer not in ("core", "common"):
            return "core imports no protocol, client, pipeline or shell module"
    elif module.startswith("rocketport.common"):
        if layer != "common":
            return "common imports nothing else of Rocketport"
    elif module.startswith("rocketport.protocols"):
        if layer == "core" and not _within(imported, FACADE):
            return "a protocol imports only the facade's public modules of core"
        if layer in ("client", "pipeline", SHELL):
            return "a protocol imports no client, pipeline or shell module"
        mine, theirs = _protocol_of(module), _protocol_of(imported)
        if (layer == "protocols" and theirs and mine != theirs
                and not _within(imported, SHARED_PROTOCOL_MODULES)
                and not _within(module, SHARED_PROTOCOL_MODULES)):
            return "no protocol imports another"
    elif module.startswith("rocketport.client"):
        if layer == "core":
            return "the client never imports the broker's core"
        if layer == "protocols" and not _within(imported, ("rocketport.protocols.remoting",)):
            return "the client speaks remoting only"
        if layer in ("pipeline", SHELL):
            return "the client imports no pipeline or shell module"
    elif module.startswith("rocketport.pipeline"):
        if layer == "protocols" and not _within(imported, ("rocketport.protocols.remoting",)):
            return "the pipeline reads over remoting only, as the client does"
        if layer == SHELL:
            return "the pipeline imports no shell module"
    return None


def _sources() -> list[Path]:
    return sorted(p for folder in PACKAGES if (REPO / folder).is_dir() for p in (REPO / folder).rglob("*.py"))


@pytest.mark.parametrize("folder", sorted(PACKAGES))
def test_imports_follow_the_layers(folder):
    broken = []
    for path in _sources():
        if path.relative_to(REPO).parts[0] != folder:
            continue
        module = _module_name(path)
        for line, imported in _imports(path):
            why = _violation(module, imported)
            if why:
                broken.append(f"{path.relative_to(REPO)}:{line} imports {imported}: {why}")
    assert not broken, "\n".join(broken)


def test_the_walk_sees_a_violation():
    """The rules bite: a core module importing a protocol is reported."""
    assert _violation("rocketport.core.store.writer", "rocketport.protocols.kafka.codec")
    assert _violation("rocketport.protocols.stomp.session", "rocketport.core.store.reader")
    assert _violation("rocketport.protocols.stomp.session", "rocketport.protocols.amqp.codec")
    assert _violation("rocketport.client.producer", "rocketport.core.broker")
    assert _violation("rocketport.client.producer", "rocketport.common.message") is None
    assert _violation("rocketport.protocols.stomp.session", "rocketport.core.broker") is None
