"""Where the settings changed while the broker ran (updateBrokerConfig) are kept.

``{storePathRootDir}/config/brokerConfig.properties`` holds ``key=value`` lines of the keys
changed live; the configuration loader applies them over the configuration file and under
``--set``, so a change made with mqadmin survives a restart as it does on RocketMQ. This
module only names and reads the file; the facade writes it.
"""

from __future__ import annotations

import os

from .errors import ConfigError


def live_config_path(store_root: str) -> str:
    return os.path.join(os.path.expanduser(store_root), "config", "brokerConfig.properties")


def read_live_config(path: str) -> dict[str, str]:
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except (FileNotFoundError, NotADirectoryError):  # no live change yet, or no store: start says why
        return {}
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror}") from None
    return {k.strip(): v.strip() for k, _, v in (line.partition("=") for line in lines) if k.strip()}
