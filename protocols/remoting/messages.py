"""Binary message layouts inside remoting bodies, and message ids (batch send bodies are
shared with the broker: `rocketport.common.batch.message_batch`).

- Pull response body: concatenated MessageExt records (the CommitLog record layout);
  decoded here for clients only. The broker sends CommitLog slices untouched, so this
  module must never grow a MessageExt encoder (the store owns that layout).
- Offset message id: uppercase hex of store IP + port (i32) + commit-log offset (i64).
- Client unique id (UNIQ_KEY), in the layout of RocketMQ's MessageClientIDSetter.
Nothing here does I/O.
"""

from __future__ import annotations

import ipaddress
import struct
from dataclasses import dataclass

from rocketport.common.message import (
    BORNHOST_V6_FLAG,
    STOREHOSTADDRESS_V6_FLAG,
    MessageExt,
    decode_properties,
    encode_properties,
)
from rocketport.common.message_id import (  # noqa: F401  (the layout decode_unique_id reads)
    MessageClientIdGenerator,
)

MESSAGE_MAGIC_CODE = 0xDAA320A7 - (1 << 32)  # as the signed i32 on the wire


class MessageFormatError(ValueError):
    """A batch body, pull body or message id that does not follow its layout."""


# --- pull bodies (client side) -------------------------------------------------------------

_EXT_HEAD = struct.Struct(">iiiiiqqiq")  # size, magic, crc, queueId, flag, qOff, phyOff, sysFlag, bornTs
_EXT_MID = struct.Struct(">iq")  # reconsumeTimes, preparedTransactionOffset
_I32 = struct.Struct(">i")
_I16 = struct.Struct(">h")
_I64 = struct.Struct(">q")
_U8 = struct.Struct(">B")


def _host(view: memoryview, pos: int, v6: bool) -> tuple[tuple[str, int], int]:
    width = 16 if v6 else 4
    packed = bytes(view[pos : pos + width])
    if len(packed) != width:
        raise MessageFormatError(f"host address at {pos} is truncated")
    address = str(ipaddress.ip_address(packed))
    return (address, _I32.unpack_from(view, pos + width)[0]), pos + width + 4


def decode_message_ext_records(data: bytes | memoryview) -> list[MessageExt]:
    """Decode the concatenated MessageExt records of a pull response body."""
    view = memoryview(data)
    end = len(view)
    pos = 0
    messages = []
    try:
        while pos < end:
            (size, magic, crc, queue_id, flag, queue_offset, physical_offset, sys_flag,
             born_ts) = _EXT_HEAD.unpack_from(view, pos)
            if magic != MESSAGE_MAGIC_CODE:
                raise MessageFormatError(f"record at {pos} has magic {magic & 0xFFFFFFFF:#x}")
            if size < _EXT_HEAD.size or pos + size > end:
                raise MessageFormatError(f"record at {pos} has size {size}")
            at = pos + _EXT_HEAD.size
            born_host, at = _host(view, at, bool(sys_flag & BORNHOST_V6_FLAG))
            store_ts = _I64.unpack_from(view, at)[0]
            store_host, at = _host(view, at + 8, bool(sys_flag & STOREHOSTADDRESS_V6_FLAG))
            reconsume_times, prepared_offset = _EXT_MID.unpack_from(view, at)
            at += _EXT_MID.size
            body_length = _I32.unpack_from(view, at)[0]
            at += 4
            if body_length < 0:
                raise MessageFormatError(f"record at {pos} has body length {body_length}")
            body = bytes(view[at : at + body_length])
            at += body_length
            topic_length = _U8.unpack_from(view, at)[0]
            topic = str(view[at + 1 : at + 1 + topic_length], "utf-8")
            at += 1 + topic_length
            properties_length = _I16.unpack_from(view, at)[0]
            at += 2
            properties = decode_properties(view[at : at + properties_length])
            at += max(properties_length, 0)
            if at != pos + size:
                raise MessageFormatError(f"record at {pos} declares {size} bytes, holds {at - pos}")
            messages.append(
                MessageExt(
                    topic=topic, body=body, properties=properties, queue_id=queue_id,
                    queue_offset=queue_offset, commit_log_offset=physical_offset,
                    store_size=size, body_crc=crc, flag=flag, sys_flag=sys_flag,
                    born_timestamp=born_ts, born_host=born_host, store_timestamp=store_ts,
                    store_host=store_host, reconsume_times=reconsume_times,
                    prepared_transaction_offset=prepared_offset,
                )
            )
            pos += size
    except (struct.error, UnicodeDecodeError) as exc:
        raise MessageFormatError(f"record at {pos} is truncated or garbled: {exc}") from None
    return messages


# Everything of a record up to its body when both hosts are IPv4 (the common case):
# size, magic, crc, queueId, flag, queueOffset, physicalOffset, sysFlag, bornTimestamp,
# bornHost (4s + port), storeTimestamp, storeHost (8 bytes: ip + port), reconsumeTimes,
# preparedTransactionOffset, body length.
_EXT_V4 = struct.Struct(">iiiiiqqiq4siq8siqi")
_HOSTS_V6 = BORNHOST_V6_FLAG | STOREHOSTADDRESS_V6_FLAG

# One record as `unpack_message_ext_records` gives it: queue id, flag, queue offset,
# commit-log offset, sys flag, born timestamp, store timestamp, store host (address bytes
# + port i32, as offset message ids embed it), reconsume times, body, topic, raw properties.
RawMessageExt = tuple[int, int, int, int, int, int, int, bytes, int, bytes, str, bytes]


def unpack_message_ext_records(data: bytes | memoryview) -> list[RawMessageExt]:
    """The records of a pull body as plain tuples, for clients on their hot path.

    `decode_message_ext_records` builds the store's MessageExt with host addresses parsed
    (13 us a message); a consumer needs neither, and this reader takes one precompiled
    unpack per IPv4 record. Properties stay encoded (`decode_properties` them when wanted).
    Raises MessageFormatError as `decode_message_ext_records` does.
    """
    if type(data) is not bytes:
        data = bytes(data)  # one copy of the body; slicing bytes beats slicing views
    end = len(data)
    pos = 0
    out: list[RawMessageExt] = []
    append = out.append
    unpack_v4 = _EXT_V4.unpack_from
    unpack_i16 = _I16.unpack_from
    head_size = _EXT_V4.size
    last_raw_topic, topic = b"", ""
    try:
        while pos < end:
            (size, magic, crc, queue_id, flag, queue_offset, physical_offset, sys_flag, born_ts,
             _born_ip, _born_port, store_ts, store_host, reconsume_times, _prepared,
             body_length) = unpack_v4(data, pos)
            if magic != MESSAGE_MAGIC_CODE:
                raise MessageFormatError(f"record at {pos} has magic {magic & 0xFFFFFFFF:#x}")
            if size < head_size or pos + size > end:
                raise MessageFormatError(f"record at {pos} has size {size}")
            if sys_flag & _HOSTS_V6:
                ext = decode_message_ext_records(data[pos:pos + size])[0]
                host, port = ext.store_host
                append((queue_id, flag, queue_offset, physical_offset, sys_flag, born_ts, store_ts,
                        ipaddress.ip_address(host).packed + _I32.pack(port), reconsume_times,
                        ext.body, ext.topic, encode_properties(ext.properties)))
                pos += size
                continue
            at = pos + head_size + body_length
            topic_end = at + 1 + data[at]
            raw_topic = data[at + 1:topic_end]
            if raw_topic != last_raw_topic:  # a pull's records nearly always share one
                last_raw_topic, topic = raw_topic, raw_topic.decode()
            properties_end = topic_end + 2 + unpack_i16(data, topic_end)[0]
            if body_length < 0 or properties_end != pos + size:
                raise MessageFormatError(f"record at {pos} has inconsistent lengths")
            append((queue_id, flag, queue_offset, physical_offset, sys_flag, born_ts, store_ts,
                    store_host, reconsume_times, data[pos + head_size:at], topic,
                    data[topic_end + 2:properties_end]))
            pos += size
    except (struct.error, UnicodeDecodeError, IndexError) as exc:
        raise MessageFormatError(f"record at {pos} is truncated or garbled: {exc}") from None
    return out


# --- offset message id ---------------------------------------------------------------------


def encode_offset_msg_id(ip: str, port: int, offset: int) -> str:
    """Offset message id: 32 hex digits for IPv4, 56 for IPv6 (RocketMQ's createMessageId)."""
    packed = ipaddress.ip_address(ip).packed
    return (packed + struct.pack(">iq", port, offset)).hex().upper()


def decode_offset_msg_id(msg_id: str) -> tuple[str, int, int]:
    """(store ip, port, commit-log offset) from an offset message id; MessageFormatError if not one."""
    if len(msg_id) not in (32, 56):
        raise MessageFormatError(f"offset message id has {len(msg_id)} characters, not 32 or 56")
    try:
        raw = bytes.fromhex(msg_id)
    except ValueError:
        raise MessageFormatError("offset message id is not hexadecimal") from None
    ip_width = len(raw) - 12
    port, offset = struct.unpack_from(">iq", raw, ip_width)
    return str(ipaddress.ip_address(raw[:ip_width])), port, offset


# --- client unique id (UNIQ_KEY) -----------------------------------------------------------


@dataclass(slots=True, frozen=True)
class UniqueIdParts:
    ip: str
    pid: int
    seed: int  # the Java client puts its class loader's hash code here
    millis_in_month: int  # milliseconds since the start of the month (local time)
    counter: int


def decode_unique_id(unique_id: str) -> UniqueIdParts:
    """Split a MessageClientIDSetter-style id; MessageFormatError for any other format."""
    if len(unique_id) not in (32, 56):
        raise MessageFormatError(f"unique id has {len(unique_id)} characters, not 32 or 56")
    try:
        raw = bytes.fromhex(unique_id)
    except ValueError:
        raise MessageFormatError("unique id is not hexadecimal") from None
    ip_width = len(raw) - 12
    pid, seed, millis, counter = struct.unpack_from(">HIIH", raw, ip_width)
    return UniqueIdParts(str(ipaddress.ip_address(raw[:ip_width])), pid, seed, millis, counter)
