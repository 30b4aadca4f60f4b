"""The name server's KV config and its own settings, as RocketMQ's name server keeps them.

Operators set namespaced key/value pairs with mqadmin's updateKvConfig / deleteKvConfig
(PUT_KV_CONFIG, DELETE_KV_CONFIG); updateOrderConf keeps a topic's ordered-queue layout in
the ORDER_TOPIC_CONFIG namespace, which routes carry when ``orderMessageEnable`` is on.
The pairs survive a restart: they are written whole to ``kvConfigPath`` (RocketMQ's
kvConfig.json shape, ``{"configTable": {namespace: {key: value}}}``) through a temporary
file, fsync and rename, on every change (changes are rare: operator commands). This
module never reads the network or the broker's store.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass

log = logging.getLogger(__name__)

ORDER_TOPIC_CONFIG = "ORDER_TOPIC_CONFIG"  # the namespace updateOrderConf writes


class KVConfig:
    def __init__(self, path: str | None) -> None:
        self.path = path  # None: kept in memory only (a broker's embedded name server in tests)
        self.table: dict[str, dict[str, str]] = {}

    def load(self) -> None:
        if not self.path or not os.path.exists(self.path):
            return
        try:
            with open(self.path, encoding="utf-8") as f:
                data = json.load(f)
            self.table = {str(ns): {str(k): str(v) for k, v in pairs.items()}
                          for ns, pairs in data.get("configTable", {}).items()}
        except (OSError, ValueError, AttributeError) as exc:
            log.warning("name server KV config %s is unreadable (%s); starting without it", self.path, exc)

    def get(self, namespace: str, key: str) -> str | None:
        return self.table.get(namespace, {}).get(key)

    def namespace(self, namespace: str) -> dict[str, str]:
        return dict(self.table.get(namespace, {}))

    def put(self, namespace: str, key: str, value: str) -> None:
        self.table.setdefault(namespace, {})[key] = value
        self._save()

    def delete(self, namespace: str, key: str) -> None:
        pairs = self.table.get(namespace)
        if pairs is not None and pairs.pop(key, None) is not None:
            if not pairs:
                del self.table[namespace]
            self._save()

    def _save(self) -> None:
        if not self.path:
            return
        os.makedirs(os.path.dirname(self.path) or ".", exist_ok=True)
        tmp = self.path + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump({"configTable": self.table}, f, indent=2, sort_keys=True)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)


@dataclass(slots=True)
class NamesrvSettings:
    """What GET_NAMESRV_CONFIG reports; UPDATE_NAMESRV_CONFIG changes only what can change live."""

    listen_port: int
    kv_config_path: str
    order_message_enable: bool = False

    LIVE = ("orderMessageEnable",)  # the rest need a restart (RocketMQ black-lists the paths)

    def as_properties(self) -> dict[str, str]:
        return {"listenPort": str(self.listen_port), "kvConfigPath": self.kv_config_path,
                "orderMessageEnable": "true" if self.order_message_enable else "false"}

    def update(self, changes: dict[str, str]) -> str | None:
        """Apply ``changes``; a problem (nothing applied) or None."""
        known = self.as_properties()
        for key, value in changes.items():
            if key not in known:
                return f"unknown name server setting {key!r}"
            if key not in self.LIVE:
                return f"{key} cannot change while the name server runs (restart it with the new value)"
            if value.strip().lower() not in ("true", "false"):
                return f"{key}: expected true or false, got {value!r}"
        if "orderMessageEnable" in changes:
            self.order_message_enable = changes["orderMessageEnable"].strip().lower() == "true"
        return None


def parse_properties_body(body: bytes) -> dict[str, str]:
    """``key=value`` lines, as mqadmin's updateNamesrvConfig sends them."""
    out = {}
    for line in body.decode("utf-8", "replace").splitlines():
        line = line.strip()
        if line and not line.startswith("#") and "=" in line:
            key, _, value = line.partition("=")
            out[key.strip()] = value.strip()
    return out
