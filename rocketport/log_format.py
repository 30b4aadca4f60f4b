"""The broker's log lines: text for a person, or one JSON object a line for a log shipper
(Fluent Bit, Vector, Loki's promtail read them without a parsing rule). Chosen with
``rocketport --log-format json``; this module only formats, it never decides what to log."""

from __future__ import annotations

import logging
from datetime import datetime, timezone

import orjson

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class JsonFormatter(logging.Formatter):
    """``{"time", "level", "logger", "message"[, "exception"]}``: UTC ISO 8601 time with
    milliseconds, the message with its arguments applied, a traceback as one string."""

    def format(self, record: logging.LogRecord) -> str:
        line = {"time": datetime.fromtimestamp(record.created, timezone.utc).isoformat(timespec="milliseconds"),
                "level": record.levelname, "logger": record.name, "message": record.getMessage()}
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return orjson.dumps(line).decode()


def configure(level: int, fmt: str) -> None:
    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter() if fmt == "json" else logging.Formatter(TEXT_FORMAT))
    logging.basicConfig(level=level, handlers=[handler])
