"""Test helper: messages with a value in every field a version has, drawn from the schema."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from rocketport.protocols.kafka.codec import _in
from rocketport.protocols.kafka.schema import APIS
from rocketport.protocols.kafka.schema._dsl import Field

_INT_BOUNDS = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "uint16": (0, 2**16 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
}


def _value(draw, kind: str, field: Field, version: int) -> Any:
    nullable = _in(field.nullable, version)
    if nullable and draw(st.integers(0, 4)) == 0:
        return None
    if kind in _INT_BOUNDS:
        return draw(st.integers(*_INT_BOUNDS[kind]))
    if kind == "float64":
        return draw(st.floats(allow_nan=False))
    if kind == "bool":
        return draw(st.booleans())
    if kind == "string":
        return draw(st.text(max_size=12))
    if kind in ("bytes", "records"):
        return draw(st.binary(max_size=40))
    if kind == "uuid":
        return draw(st.binary(min_size=16, max_size=16))
    if kind == "struct":
        return message(draw, field.fields, version)
    if kind == "[]":
        return [message(draw, field.fields, version) for _ in range(draw(st.integers(0, 2)))]
    assert kind.startswith("[]"), kind
    return [_value(draw, kind[2:], Field(field.name, kind[2:], field.versions), version) for _ in range(draw(st.integers(0, 3)))]


def message(draw, fields: tuple[Field, ...], version: int, flexible: bool = True) -> dict[str, Any]:
    """Values for the fields present at ``version`` (tagged ones only when flexible)."""
    out = {}
    for field in fields:
        if _in(field.versions, version) and (field.tag is None or flexible):
            out[field.name] = _value(draw, field.type, field, version)
    return out


def api_versions() -> list[tuple[int, int]]:
    return [(key, v) for key, api in sorted(APIS.items()) for v in range(api.versions[0], api.versions[1] + 1)]


def normalise(value: Any) -> Any:
    """memoryviews (records) compare as bytes."""
    if isinstance(value, memoryview):
        return bytes(value)
    if isinstance(value, dict):
        return {k: normalise(v) for k, v in value.items()}
    if isinstance(value, list):
        return [normalise(v) for v in value]
    return value


def project(decoded: dict[str, Any], sent: dict[str, Any]) -> dict[str, Any]:
    """The decoded message restricted to the fields that were sent (recursively)."""
    out = {}
    for name, value in sent.items():
        got = decoded[name]
        if isinstance(value, dict):
            out[name] = project(got, value)
        elif isinstance(value, list) and value and isinstance(value[0], dict):
            out[name] = [project(g, v) for g, v in zip(got, value)] if len(got) == len(value) else got
        else:
            out[name] = got
    return normalise(out)
