"""Turns a parsed SQL92 filter into Python functions, compiled once per subscription.

Evaluation is the broker's hot path (every pulled message of a filtered subscription), so
instead of walking the tree per message we emit Python source for the whole condition and
`compile()` it. Only this module writes that source: property names and scalar constants
enter it through `repr()` of values whose type we checked (which always yields a literal
that evaluates to the same value) and IN lists through the function's namespace; no text
of the user's expression is ever spliced in. The namespace has no builtins.

Each node compiles to a Python expression whose value is RocketMQ's result for it: True,
False or None (SQL "unknown"), or the Java value of an operand. Where Java throws, the
code raises `EvaluationAborted`. Evaluation order matches RocketMQ's, so a conversion that
would throw there throws here. AND/OR nodes become small helper functions with flat
statements, which keeps the generated code shallow.

Two entry points share that code: `_match(p, t)` reads a property mapping, `_match_raw(r)`
a record's encoded properties, where it finds just the properties the tree names (property
names and their needles enter through the namespace too). The store's scan uses the raw
one: it never decodes the properties of a message it does not need. Both read every named
property first (reading cannot raise, so that cannot change the result) and answer whether
the result is True, with `EvaluationAborted` caught inside. Never imports a protocol, never
I/O.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from itertools import count
from typing import Optional

from rocketport.common.message import PROPERTY_TAGS, property_needles
from rocketport.core.filter import java
from rocketport.core.filter.sql_ast import (
    BOOLEAN,
    DOUBLE,
    INT,
    LONG,
    NULL,
    NUMERIC,
    STRING,
    And,
    BoolCast,
    Compare,
    Equal,
    In,
    IsNull,
    Literal,
    Negate,
    Node,
    Not,
    Or,
    Property,
    StringTest,
    children,
    kind_of,
)

# (properties, tags) -> whether the message matches (RocketMQ's result is True).
Matcher = Callable[[Mapping[str, str], Optional[str]], bool]
# the same on a record's encoded properties (name \x01 value \x02 ...), tags being TAGS
RawMatcher = Callable[[bytes], bool]

_RUNTIME: dict[str, object] = {
    "_int": java.java_int,
    "_long": java.java_long,
    "_double": java.java_double,
    "_dkey": java.java_double_key,
    "_dcmp": java.java_double_compare,
    "_bool": java.java_boolean,
    "_bool_vs_str": java.boolean_against_string,
    "float": float,
    "int": int,
    "len": len,
    "UnicodeDecodeError": UnicodeDecodeError,
    "_Aborted": java.EvaluationAborted,
}

_INTEGRAL = (INT, LONG)
_STRING_CONVERSION = {INT: "_int", LONG: "_long", DOUBLE: "_dkey"}
# Unsigned decimal strings this short always fit, so they skip the call (the conversion is
# most of a numeric filter's cost); int() reads the same Unicode digits isdecimal() accepts.
_SHORT_DIGITS = {INT: 10, LONG: 19}


def _convert(kind: str, operand: str) -> str:
    """Code converting ``operand`` (a name or literal: it may be repeated) as Java would."""
    call = f"{_STRING_CONVERSION[kind]}({operand})"
    if kind not in _SHORT_DIGITS:
        return call
    short = f"len({operand}) < {_SHORT_DIGITS[kind]} and {operand}.isdecimal()"
    return f"(int({operand}) if {short} else {call})"


def _ordering_pair(lk: str, rk: str) -> str:
    """Template for `l op r` on non-null Java values of kinds lk, rk (RocketMQ's rules)."""
    if lk == STRING and rk == STRING:  # both sides parsed as doubles
        return "_dcmp(_double({l}), _double({r})) {op} 0"
    if lk == STRING:
        return _convert(rk, "{l}") + " {op} {r}"
    if rk == STRING:
        return "{l} {op} " + _convert(lk, "{r}")
    if lk in _INTEGRAL and rk == DOUBLE:  # Java widens to double (rounding), not exact
        return "float({l}) {op} {r}"
    if lk == DOUBLE and rk in _INTEGRAL:
        return "{l} {op} float({r})"
    return "{l} {op} {r}"


def _equality_pair(lk: str, rk: str) -> str:
    """Template for `l = r` on non-null Java values of kinds lk, rk (RocketMQ's rules)."""
    if lk == rk or (lk in _INTEGRAL and rk in _INTEGRAL):
        return "_dcmp({l}, {r}) == 0" if lk == DOUBLE else "{l} == {r}"
    if lk == STRING and rk in NUMERIC:
        return _convert(rk, "{l}") + " == {r}"
    if rk == STRING and lk in NUMERIC:
        return "{l} == " + _convert(lk, "{r}")
    if lk == STRING and rk == BOOLEAN:
        return "_bool({l}) == {r}"
    if lk == BOOLEAN and rk == STRING:
        return "_bool_vs_str()"
    if BOOLEAN in (lk, rk):  # a Boolean against a number: Java's compare gives -1
        return "False"
    return "_dcmp(float({l}), float({r})) == 0"  # Integer/Long against Double: widen


def _pure(node: Node) -> bool:
    """Evaluating this node can never raise (so it may be skipped or repeated freely)."""
    if isinstance(node, (Property, Literal)):
        return True
    return isinstance(node, Negate) and _pure(node.operand)


def _nullable(node: Node) -> bool:
    """This node may evaluate to null (conservative: True when unsure)."""
    if isinstance(node, Literal):
        return node.value is None
    if isinstance(node, Negate):
        return kind_of(node) == NULL
    if isinstance(node, Compare):
        return True
    if isinstance(node, Equal):  # null only when the left is null and the right is not
        return _nullable(node.left) and kind_of(node.right) != NULL
    if isinstance(node, (IsNull, StringTest)):
        return False
    if isinstance(node, Not):
        return _nullable(node.operand)
    if isinstance(node, (And, Or)):
        return any(_nullable(operand) for operand in node.operands)
    return True  # Property, In, BoolCast


def _fold(node: Node) -> int | float:
    """The value of a numeric constant (a literal under any number of unary minuses)."""
    if isinstance(node, Literal) and isinstance(node.value, (int, float)):
        return node.value
    assert isinstance(node, Negate)
    return -_fold(node.operand)


def _scalar(value: object) -> str:
    # repr() of these exact types is always a Python literal of the same value.
    assert value is None or type(value) in (bool, int, str) or (
        type(value) is float and math.isfinite(value)  # type: ignore[arg-type]
    )
    return f"({value!r})"


class _Emitter:
    def __init__(self) -> None:
        self._ids = count()
        self.helpers: list[str] = []
        self.constants: dict[str, object] = {}
        self.locals: dict[str, str] = {}  # property name -> the local holding its value
        self.args = ""  # those locals, as the helpers' parameter list

    def _name(self, prefix: str) -> str:
        return f"_{prefix}{next(self._ids)}"

    def module(self, tree: Node) -> str:
        # Every property the tree reads becomes a parameter of the helpers, read once up
        # front: reading one can never raise, so doing it before the short-circuit is safe.
        names = sorted(property_names(tree))
        self.locals = {name: f"_p{i}" for i, name in enumerate(names)}
        self.args = ", ".join(self.locals.values())
        if isinstance(tree, And):  # at the top only True matters, so stop at the first miss
            body = [f"if {self.value(c)} is not True: return False" for c in tree.operands]
            body.append("return True")
        elif isinstance(tree, Or):
            body = [f"if {self.value(c)} is True: return True" for c in tree.operands]
            body.append("return False")
        else:
            body = [f"return {self.value(tree)} is True"]
        from_mapping = [f"{local} = p.get({_scalar(name)}"
                        + (", t)" if name == PROPERTY_TAGS else ")")
                        for name, local in self.locals.items()]
        from_raw = []
        for name, local in self.locals.items():
            inner, first = property_needles(name)
            self.constants[f"{local}_in"], self.constants[f"{local}_first"] = inner, first
            from_raw += _raw_property_lines(local)
        guarded = ["try:", *(f"    {line}" for line in body),
                   "except _Aborted:", "    return False"]
        functions = [("_match(p, t)", from_mapping + guarded),
                     ("_match_raw(r)", from_raw + guarded)]
        return "\n".join([*self.helpers, *(
            f"def {signature}:\n" + "".join(f"    {line}\n" for line in lines)
            for signature, lines in functions)])

    def value(self, node: Node) -> str:
        if isinstance(node, Property):
            return self.locals[node.name]
        if isinstance(node, Literal):
            return _scalar(node.value)
        if isinstance(node, Negate):
            return self._negate(node)
        if isinstance(node, Compare):
            return self._compare(node)
        if isinstance(node, Equal):
            return self._equal(node)
        if isinstance(node, IsNull):
            return self._is_null(node.operand)
        if isinstance(node, StringTest):
            return self._string_test(node)
        if isinstance(node, In):
            return self._in(node)
        if isinstance(node, Not):
            return self._not(node)
        if isinstance(node, (And, Or)):
            return self._connective(node)
        assert isinstance(node, BoolCast)
        return f"(None if {self.value(node.property)} is None else False)"

    def _evaluated_then(self, node: Node, result: str) -> str:
        """`result`, after evaluating node if that could raise (Java evaluates it)."""
        return result if _pure(node) else f"(({self.value(node)}), {result})[1]"

    def _is_null(self, operand: Node) -> str:
        if _pure(operand) and not _nullable(operand):  # a non-null constant
            return "False"
        if _pure(operand) and kind_of(operand) == NULL:  # minus of a non-number
            return "True"
        return f"({self.value(operand)} is None)"

    def _negate(self, node: Negate) -> str:
        if kind_of(node) in NUMERIC:
            return _scalar(_fold(node))
        return self._evaluated_then(node.operand, "None")  # minus of a non-number is null

    def _bind(self, node: Node, checks: list[str]) -> str:
        code = self.value(node)
        if not _nullable(node):
            return code
        if isinstance(node, Property):  # already a local
            checks.append(f"{code} is None")
            return code
        name = self._name("v")
        checks.append(f"({name} := {code}) is None")
        return name

    def _compare(self, node: Compare) -> str:
        lk, rk = kind_of(node.left), kind_of(node.right)
        has_null = NULL in (lk, rk)
        if has_null and _pure(node.left) and _pure(node.right):
            return "None"
        checks: list[str] = []
        left = self._bind(node.left, checks)
        right = self._bind(node.right, checks)
        pair = "None" if has_null else _ordering_pair(lk, rk).format(l=left, r=right, op=node.op)
        return f"(None if {' or '.join(checks)} else {pair})" if checks else f"({pair})"

    def _equal(self, node: Equal) -> str:
        left, right = node.left, node.right
        lk, rk = kind_of(left), kind_of(right)
        template = "None" if NULL in (lk, rk) else _equality_pair(lk, rk)
        if _pure(left) and _pure(right):
            if not _nullable(left) and not _nullable(right):
                return f"({template.format(l=self.value(left), r=self.value(right))})"
            if not _nullable(right):  # left null, right not: unknown
                name = self._name("v")
                pair = template.format(l=name, r=self.value(right))
                return f"(None if ({name} := {self.value(left)}) is None else {pair})"
            if not _nullable(left):  # right null, left not: false
                name = self._name("v")
                pair = template.format(l=self.value(left), r=name)
                return f"(False if ({name} := {self.value(right)}) is None else {pair})"
        # General case: evaluate both, in order, without short-circuit (`&`), then apply
        # RocketMQ's null rules: both null is true, only left null unknown, only right false.
        lname, rname = self._name("v"), self._name("v")
        pair = template.format(l=lname, r=rname)
        null_case = f"((True if {rname} is None else None) if {lname} is None else False)"
        return (
            f"({pair} if (({lname} := {self.value(left)}) is not None)"
            f" & (({rname} := {self.value(right)}) is not None) else {null_case})"
        )

    def _string_test(self, node: StringTest) -> str:
        if not node.search:  # RocketMQ answers false without looking at the operand
            return "False"
        if kind_of(node.operand) != STRING:
            return self._evaluated_then(node.operand, "False")
        name = self._name("v")
        search = _scalar(node.search)
        test = {
            "contains": f"{search} in {name}",
            "startswith": f"{name}.startswith{search}",
            "endswith": f"{name}.endswith{search}",
        }[node.op]
        if node.negated:
            test = f"not {test}"
        return f"(({name} := {self.value(node.operand)}) is not None and {test})"

    def _in(self, node: In) -> str:
        values = self._name("k")
        self.constants[values] = node.values
        name = self._name("v")
        op = "not in" if node.negated else "in"
        return f"(None if ({name} := {self.value(node.property)}) is None else {name} {op} {values})"

    def _not(self, node: Not) -> str:
        code = self.value(node.operand)
        if not _nullable(node.operand):
            return f"(not {code})"
        name = self._name("v")
        return f"(None if ({name} := {code}) is None else not {name})"

    def _connective(self, node: And | Or) -> str:
        # Kleene logic with RocketMQ's short-circuit: AND stops at the first false, OR at
        # the first true; otherwise any unknown operand makes the result unknown.
        name = self._name("h")
        stop, otherwise = ("False", "True") if isinstance(node, And) else ("True", "False")
        lines = [f"def {name}({self.args}):", "    u = False"]
        for operand in node.operands:
            lines.append(f"    v = {self.value(operand)}")
            lines.append(f"    if v is {stop}: return {stop}")
            if _nullable(operand):
                lines.append("    if v is None: u = True")
        lines.append(f"    return None if u else {otherwise}")
        self.helpers.append("\n".join(lines))
        return f"{name}({self.args})"


def _raw_property_lines(local: str) -> list[str]:
    """`core.message.raw_property` unrolled into the matcher: the search runs once per
    message scanned, and the two calls it saves are ~10% of a filtered scan."""
    return [
        f"_, _f, _v = r.rpartition({local}_in)",
        "if not _f:",
        f"    _b, _f, _v = r.partition({local}_first)",
        "    if _b: _f = None  # only the first property has no separator before it",
        "if _f:",
        "    _v = _v.partition(b'\\x02')[0]",
        "    try:",
        f"        {local} = _v.decode()",
        "    except UnicodeDecodeError:",
        f"        {local} = _v.decode('utf-8', 'surrogateescape')",
        "else:",
        f"    {local} = None",
    ]


def generate(tree: Node) -> tuple[str, dict[str, object]]:
    """The Python source of `_match(p, t)` and `_match_raw(r)` for this tree, and the
    constants they use."""
    emitter = _Emitter()
    source = emitter.module(tree)
    return source, emitter.constants


def compile_matchers(tree: Node) -> tuple[Matcher, RawMatcher]:
    """The tree's matchers on a property mapping and on encoded properties."""
    source, constants = generate(tree)
    namespace: dict[str, object] = {"__builtins__": {}, **_RUNTIME, **constants}
    exec(compile(source, "<rocketport sql92 filter>", "exec"), namespace)
    return namespace["_match"], namespace["_match_raw"]  # type: ignore[return-value]


def property_names(node: Node) -> frozenset[str]:
    """The names of the properties the tree reads."""
    names: set[str] = set()
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, Property):
            names.add(n.name)
        else:
            stack.extend(children(n))
    return frozenset(names)
