"""The SQL92 filter syntax tree: what the parser builds and the code generator reads.

Shapes follow RocketMQ's expression objects after its parse-time rewrites, so one rule per
node states the semantics: `x BETWEEN a AND b` is `x >= a AND x <= b`, `NOT BETWEEN` is
`x < a OR x > b`, `<>` is NOT of `=`, `IS NOT NULL` is NOT of `IS NULL`, a bare property
used as a condition is a BoolCast, and chains of AND (or OR) are one n-ary node. Nodes are
plain immutable records; they never evaluate anything.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Union

# Static Java type of a value. Properties are always strings (or missing).
STRING, INT, LONG, DOUBLE, BOOLEAN, NULL = "String", "Integer", "Long", "Double", "Boolean", "null"
NUMERIC = (INT, LONG, DOUBLE)


@dataclass(frozen=True, slots=True)
class Property:
    name: str
    position: int


@dataclass(frozen=True, slots=True)
class Literal:
    """A constant; `kind` is its Java type (an integer literal that fits is an Integer)."""

    value: str | int | float | bool | None
    kind: str
    position: int


@dataclass(frozen=True, slots=True)
class Negate:
    operand: Node
    position: int


@dataclass(frozen=True, slots=True)
class Compare:
    """An ordering comparison: op is one of > >= < <=."""

    op: str
    left: Node
    right: Node
    position: int


@dataclass(frozen=True, slots=True)
class Equal:
    left: Node
    right: Node
    position: int


@dataclass(frozen=True, slots=True)
class IsNull:
    operand: Node
    position: int


@dataclass(frozen=True, slots=True)
class StringTest:
    """CONTAINS / STARTSWITH / ENDSWITH (op is the lower-case name), maybe negated."""

    op: str
    negated: bool
    operand: Node
    search: str
    position: int


@dataclass(frozen=True, slots=True)
class In:
    property: Property
    values: frozenset[str]
    negated: bool
    position: int


@dataclass(frozen=True, slots=True)
class Not:
    operand: Node
    position: int


@dataclass(frozen=True, slots=True)
class And:
    operands: tuple[Node, ...]
    position: int


@dataclass(frozen=True, slots=True)
class Or:
    operands: tuple[Node, ...]
    position: int


@dataclass(frozen=True, slots=True)
class BoolCast:
    """A property used where a condition is expected: unknown if missing, else false."""

    property: Property
    position: int


Node = Union[Property, Literal, Negate, Compare, Equal, IsNull, StringTest, In, Not, And, Or, BoolCast]
BOOLEAN_NODES = (Compare, Equal, IsNull, StringTest, In, Not, And, Or, BoolCast)


def is_boolean(node: Node) -> bool:
    """RocketMQ's `instanceof BooleanExpression`: conditions and TRUE/FALSE/NULL."""
    return isinstance(node, BOOLEAN_NODES) or (
        isinstance(node, Literal) and node.kind in (BOOLEAN, NULL)
    )


def kind_of(node: Node) -> str:
    """The Java type the node evaluates to (when it is not null)."""
    if isinstance(node, Property):
        return STRING
    if isinstance(node, Literal):
        return node.kind
    if isinstance(node, Negate):
        inner = kind_of(node.operand)
        return inner if inner in NUMERIC else NULL
    return BOOLEAN


def children(node: Node) -> tuple[Node, ...]:
    if isinstance(node, (And, Or)):
        return node.operands
    if isinstance(node, (Compare, Equal)):
        return (node.left, node.right)
    if isinstance(node, (Negate, IsNull, StringTest, Not)):
        return (node.operand,)
    if isinstance(node, (In, BoolCast)):
        return (node.property,)
    return ()
