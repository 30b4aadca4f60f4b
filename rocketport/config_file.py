"""Read broker configuration files: YAML (conf/broker.yaml) or RocketMQ's broker.properties.

Both produce the same RocketMQ-named mapping, which BrokerConfig validates. A properties
file may carry protocol sections as dotted keys (``kafka.port=9092``).
"""

from __future__ import annotations

from typing import Any

import yaml

from rocketport.core.config import BrokerConfig
from rocketport.core.errors import ConfigError


def parse_properties(text: str) -> dict[str, Any]:
    """Java .properties: key=value, key:value or key value; # and ! comments; \\ continues."""
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
        if "." in key:
            section, _, sub = key.partition(".")
            values.setdefault(section, {})[sub] = value
        else:
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


def load_config(path: str | None, overrides: dict[str, Any] | None = None) -> BrokerConfig:
    """Load ``path`` (YAML or .properties) and apply ``overrides`` (RocketMQ key names)."""
    values: dict[str, Any] = {}
    if path:
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except OSError as exc:
            raise ConfigError(f"cannot read configuration {path}: {exc.strerror}") from None
        if path.endswith(".properties"):
            values = parse_properties(text)
        else:
            try:
                loaded = yaml.safe_load(text)
            except yaml.YAMLError as exc:
                raise ConfigError(f"{path}: not valid YAML: {exc}") from None
            if loaded is None:
                loaded = {}
            if not isinstance(loaded, dict):
                raise ConfigError(f"{path}: expected a mapping of keys to values")
            values = loaded
    for key, value in (overrides or {}).items():
        if "." in key:
            section, _, sub = key.partition(".")
            values.setdefault(section, {})[sub] = value
        else:
            values[key] = value
    return BrokerConfig.from_mapping(values)
