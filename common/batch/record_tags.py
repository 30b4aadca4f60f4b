"""Each record's tag in a record batch: what its ConsumeQueue entries' tags codes are made of.

A batch stored whole is indexed as one ConsumeQueue entry per record, and a tag subscription
prefilters on each entry's tags code. The produce path (storing the batch) and recovery
(re-dispatching it from the CommitLog after a crash) must derive those codes from the
records the same way, or a rebuilt ConsumeQueue filters differently from the one the broker
served before; this module is that one way, for every front-end that stores batches.

A record's tag is the value of its header named ``TAGS``, else of its header named
``tag_header`` (``kafkaTagHeader``), the last non-null one if the name repeats, decoded as
UTF-8 with ``surrogateescape``: the TAGS that core.batch.messages gives the record, so the
prefilter and the exact check agree. A record without one has no tag (code 0).

Records are decoded only when the header's name occurs in the (decompressed) payload: most
batches carry no tag, and one regular-expression search (~1 ms per MiB) is far cheaper than
decoding their records. Never imports a protocol; never writes.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import lru_cache

from ..message import PROPERTY_TAGS
from ..tags import tags_code
from .compression import CompressionError, decompress
from .record_batch import HEADER_SIZE, CorruptBatch, iter_payload_records, parse_header

__all__ = ["batch_tags", "codes_and_shared", "payload_tags"]

Buffer = bytes | bytearray | memoryview


@lru_cache(maxsize=16)
def _name_search(name: str) -> Callable[[Buffer], re.Match | None]:
    # re searches a memoryview in place, where ``in`` would need a copy to bytes; one
    # literal each (an alternation of two is searched several times slower)
    return re.compile(re.escape(name.encode("utf-8"))).search


def payload_tags(payload: Buffer, count: int, tag_header: str) -> list[str | None] | None:
    """The tag of each of the ``count`` records of a records payload (decompressed), or None
    when neither ``TAGS`` nor ``tag_header``'s name occurs in it: then no record has a tag,
    and none was decoded. Raises CorruptBatch when the records do not decode."""
    if _name_search(tag_header)(payload) is None and _name_search(PROPERTY_TAGS)(payload) is None:
        return None
    data = payload if isinstance(payload, bytes) else bytes(payload)
    out: list[str | None] = []
    append = out.append
    for record in iter_payload_records(data, count):
        tag = explicit = None
        for name, value in record.headers:
            if value is not None:  # the last one wins, as in a message's properties
                if name == PROPERTY_TAGS:
                    explicit = value
                elif name == tag_header:
                    tag = value
        if explicit is not None:
            tag = explicit
        append(None if tag is None else tag.decode("utf-8", "surrogateescape"))
    return out


def batch_tags(batch: Buffer, tag_header: str) -> list[str | None] | None:
    """`payload_tags` of a whole batch (v2 layout), decompressing its payload when its codec
    says so (an uncompressed one is searched in place, without a copy). Raises CorruptBatch
    for a batch whose framing, compression or records do not hold together."""
    view = memoryview(batch)
    header = parse_header(view)
    if header.size > len(view):
        raise CorruptBatch(f"batch claims {header.size} bytes, buffer holds {len(view)}")
    payload: Buffer = view[HEADER_SIZE:header.size]
    if header.compression:
        try:
            payload = decompress(header.compression, payload)
        except CompressionError as exc:
            raise CorruptBatch(str(exc)) from exc
    return payload_tags(payload, header.records_count, tag_header)


def codes_and_shared(tags: list[str | None]) -> tuple[list[int], str | None]:
    """(tags code of each record, the tag every record carries or None): a batch's records
    all sharing one tag can be stored with it as TAGS, for checks that read the batch whole."""
    codes = [tags_code(tag) for tag in tags]
    distinct = set(tags)
    shared = distinct.pop() if len(distinct) == 1 else None
    return codes, shared or None
