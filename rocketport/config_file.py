"""Read broker configuration files: YAML (conf/broker.yaml) or RocketMQ's broker.properties.

Both produce the same RocketMQ-named mapping, which BrokerConfig validates. A properties
file may carry protocol sections as dotted keys (``kafka.port=9092``), a YAML file nested or
dotted; --set overrides are dotted. The file's problems and the overrides' are reported
together, each line saying which it came from.
"""

from __future__ import annotations

from typing import Any

import yaml

from rocketport.core.config import BrokerConfig
from rocketport.core.errors import ConfigError
from rocketport.core.live_config import live_config_path, read_live_config


def parse_properties(text: str) -> dict[str, Any]:
    """Java .properties: key=value, key:value or key value; # and ! comments; \\ continues.
    Dotted keys stay as written (BrokerConfig folds ``kafka.port`` into its section), so an
    unknown one is reported whole."""
    values: dict[str, Any] = {}
    logical = ""
    for raw in text.splitlines():
        line = raw.strip() if not logical else raw.lstrip()
        if not logical and (not line or line[0] in "#!"):
            continue
        if line.endswith("\\") and not line.endswith("\\\\"):
            logical += line[:-1]
            continue
        logical += line
        key, value = _split_property(logical)
        logical = ""
        values[key] = value
    return values


def _split_property(line: str) -> tuple[str, str]:
    for i, ch in enumerate(line):
        if ch in "=:" or ch.isspace():
            key = line[:i]
            rest = line[i:].lstrip()
            if rest[:1] in ("=", ":") and ch not in "=:":
                rest = rest[1:]
            elif ch in "=:":
                rest = line[i + 1:]
            return key.strip(), rest.strip()
    return line.strip(), ""


OVERRIDES = "--set"  # how problems in overrides are labelled
# `rocketport broker` with no file: what conf/broker.yaml turns on that a BrokerConfig built
# in code (tests, a program embedding the broker) leaves off
NO_FILE_DEFAULTS: dict[str, Any] = {"http.enabled": "true"}


def load_config(path: str | None, overrides: dict[str, Any] | None = None) -> BrokerConfig:
    """Load ``path`` (YAML or .properties), then the settings updateBrokerConfig changed
    while a broker ran on this store, then ``overrides`` (RocketMQ key names, dotted for a
    section: ``kafka.port``); a later one wins. A ConfigError
    lists every problem of both, one line each, behind the file's path or "--set"."""
    values: dict[str, Any] = {} if path else dict(NO_FILE_DEFAULTS)
    if path:
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except OSError as exc:
            raise ConfigError(f"cannot read configuration {path}: {exc.strerror}") from None
        if path.endswith((".properties", ".conf")):  # RocketMQ ships both: conf/broker.conf
            values = parse_properties(text)
        else:
            try:
                loaded = yaml.safe_load(text)
            except yaml.YAMLError as exc:
                raise ConfigError(f"{path}: not valid YAML{_yaml_problem(exc)}") from None
            if loaded is None:
                loaded = {}
            if not isinstance(loaded, dict):
                raise ConfigError(f"{path}: expected a mapping of keys to values")
            values = {str(k): v for k, v in loaded.items()}
    sources = {key: path for key in values} if path else {}
    overrides = overrides or {}
    root = overrides.get("storePathRootDir", values.get("storePathRootDir", BrokerConfig().store_path_root_dir))
    live_path = live_config_path(str(root))
    for key, value in read_live_config(live_path).items():  # updateBrokerConfig's, over the file
        values[key] = value
        sources[key] = live_path
    for key in overrides:  # an override's key moves to the end: applied after the file
        values.pop(key, None)
        sources[key] = OVERRIDES
    return BrokerConfig.from_mapping({**values, **overrides}, sources=sources)


def _yaml_problem(exc: yaml.YAMLError) -> str:
    """Where and what, on one line (PyYAML's own message spans several, with a snippet)."""
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None)
    if mark is not None and problem:
        return f" at line {mark.line + 1}, column {mark.column + 1}: {problem}"
    return ": " + " ".join(str(exc).split())
