"""What every Kafka adapter shares: the protocol's n/a reasons and the record mapping
(key = KEYS, header `tag` = TAGS, other headers = properties, timestamp = born time)."""

from __future__ import annotations

from collections.abc import Iterable

from ..base import In, Out

LACKS = {
    "tag_filter": "Kafka has no broker-side filter: a consumer reads every record of its partitions",
    "sql92": "Kafka has no broker-side filter: a consumer reads every record of its partitions",
    "delayed": "Kafka has no delayed delivery",
    "retry_dlq": "Kafka has no negative acknowledgement: a consumer only moves its offset",
}
CODECS = ("gzip", "snappy", "lz4", "zstd")
TAG_HEADER = "tag"
MAX_BYTES = 4 << 20  # the broker's maxMessageSize: room for the 1 MiB scenario


def headers(m: Out) -> list[tuple[str, bytes]]:
    out = [(TAG_HEADER, m.tag.encode())] if m.tag is not None else []
    return out + [(k, v.encode()) for k, v in m.props.items()]


def received(value: bytes | None, key: bytes | None, hdrs: Iterable[tuple[str, bytes | None]] | None,
             timestamp_ms: int | None) -> In:
    props = {k: (v or b"").decode(errors="surrogateescape") for k, v in (hdrs or [])}
    return In(body=value or b"", key=key.decode(errors="surrogateescape") if key is not None else None,
              tag=props.pop(TAG_HEADER, None), props=props, timestamp_ms=timestamp_ms)
