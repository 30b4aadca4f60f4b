"""Every version ApiVersions advertises is served: for each API key and each version from the
advertised minimum to the maximum, a request with every field of that version (zero values,
empty arrays) gets an answer on a live broker, and no error in it is UNSUPPORTED_VERSION.
A version the codec or a handler did not serve would close the connection or say so."""

from __future__ import annotations

from typing import Any

from rocketport.protocols.kafka.codec import _in
from rocketport.protocols.kafka.errors import ErrorCode
from rocketport.protocols.kafka.schema import APIS, ApiKey
from rocketport.protocols.kafka.schema._dsl import Field
from tests.protocols.kafka.kafka_raw import RawClient

_ZERO = {"int8": 0, "int16": 0, "uint16": 0, "int32": 0, "int64": 0, "float64": 0.0, "bool": False,
         "string": "probe", "bytes": b"", "records": b"", "uuid": bytes(16)}
# fields whose zero value would make a request one the broker does not answer
_OVERRIDES: dict[tuple[int, str], Any] = {(ApiKey.PRODUCE, "acks"): 1}


def _body(api_key: int, fields: tuple[Field, ...], version: int, flexible: bool) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for f in fields:
        if not _in(f.versions, version) or (f.tag is not None and not flexible):
            continue
        if (api_key, f.name) in _OVERRIDES:
            out[f.name] = _OVERRIDES[api_key, f.name]
        elif f.type == "struct":
            out[f.name] = _body(api_key, f.fields, version, flexible)
        elif f.type.startswith("[]"):
            out[f.name] = []
        else:
            out[f.name] = _ZERO[f.type]
    return out


def _codes(value: Any) -> list[int]:
    """Every error_code anywhere in a decoded answer."""
    if isinstance(value, dict):
        return [c for k, v in value.items() for c in ([v] if k == "error_code" else _codes(v))]
    if isinstance(value, list):
        return [c for v in value for c in _codes(v)]
    return []


def test_every_advertised_version_of_every_api_is_served(live_broker):
    with RawClient(live_broker.port) as raw:
        advertised = raw.request(ApiKey.API_VERSIONS, 3, {"client_software_name": "probe",
                                                          "client_software_version": "1"})["api_keys"]
    assert {k["api_key"] for k in advertised} == set(APIS)
    refused = []
    for entry in advertised:
        api = APIS[entry["api_key"]]
        for version in range(entry["min_version"], entry["max_version"] + 1):
            flexible = api.flexible is not None and version >= api.flexible
            body = _body(api.key, api.request, version, flexible)
            try:
                with RawClient(live_broker.port) as raw:  # one connection each: a refusal may close it
                    answer = raw.request(api.key, version, body)
            except (ConnectionError, OSError, AssertionError) as exc:
                refused.append((api.name, version, repr(exc)))
                continue
            if ErrorCode.UNSUPPORTED_VERSION in _codes(answer):
                refused.append((api.name, version, "UNSUPPORTED_VERSION"))
    assert not refused, refused
