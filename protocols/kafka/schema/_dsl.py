"""The vocabulary of the Kafka API definitions: an API is data, a field is a tuple of facts.

Each ``schema/<api>.py`` module declares one API with these two constructors, transcribed
from Kafka 3.9's message specs; ``codec.py`` is the only code that interprets them. This
module must never encode or decode bytes.

Field types: ``int8 int16 int32 int64 uint16 float64 bool string bytes records uuid``,
``[]<primitive>`` for arrays of primitives, ``[]`` for an array of structs and ``struct``
for a single struct (their fields are the nested ``F(...)`` arguments). Version ranges use
Kafka's notation: ``"3+"``, ``"0-4"``, ``"none"``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

MISSING: Final[Any] = object()  # "no explicit default": the codec uses the type's zero value


@dataclass(frozen=True, slots=True)
class Field:
    name: str
    type: str
    versions: str
    fields: tuple[Field, ...] = ()
    nullable: str = "none"
    tag: int | None = None  # a tagged field in flexible versions (its ``versions`` are tagged)
    default: Any = MISSING


@dataclass(frozen=True, slots=True)
class Api:
    key: int
    name: str
    versions: tuple[int, int]  # the versions this broker serves (may cap Kafka's range)
    flexible: int | None  # first flexible version, None when no served version is flexible
    request: tuple[Field, ...]
    response: tuple[Field, ...]


def F(  # noqa: N802 - reads as a declaration in the schema modules
    name: str,
    type: str,  # noqa: A002 - Kafka's own key
    versions: str,
    *fields: Field,
    nullable: str = "none",
    tag: int | None = None,
    default: Any = MISSING,
) -> Field:
    return Field(name, type, versions, fields, nullable, tag, default)
