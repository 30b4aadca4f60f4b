"""Kafka record batch v2 as the store's inner-batch format: header, CRC, records, codecs.

Never imports a protocol package; the Kafka front-end and the store both build on it.
"""

from .compression import CompressionError, compress, decompress
from .record_batch import (
    HEADER_SIZE,
    BatchHeader,
    CorruptBatch,
    Record,
    build_batch,
    iter_records,
    parse_header,
    set_base_offset,
    split_batches,
    verify_crc,
)

__all__ = [
    "HEADER_SIZE",
    "BatchHeader",
    "CompressionError",
    "CorruptBatch",
    "Record",
    "build_batch",
    "compress",
    "decompress",
    "iter_records",
    "parse_header",
    "set_base_offset",
    "split_batches",
    "verify_crc",
]
