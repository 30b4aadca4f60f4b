"""Property tests: compiled SQL92 filters agree with an independent reference interpreter.

Both matchers are checked: on a property mapping, and on the encoded properties the store's
scan hands over (where the tags are the TAGS property).
The reference below is written from RocketMQ's documented behaviour (Java value types,
Integer/Long/Double/Boolean.valueOf conversions, three-valued logic with left-to-right
short-circuit, a thrown conversion making the message not match). It walks the generated
tree directly and shares no code with rocketport.core.filter.
"""

from __future__ import annotations

import math
import re

from hypothesis import given, settings
from hypothesis import strategies as st

from rocketport.common.message import encode_properties
from rocketport.core.filter import compile_filter

SETTINGS = settings(max_examples=400, deadline=None)

PROPERTY_NAMES = ["a", "b", "c", "TAGS"]
PROPERTY_VALUES = [
    "5", "-3", "0", "+7", "007", "2147483647", "2147483648", "-2147483649",
    "9223372036854775808", "1.5", "-0", "-0.0", "0.0", "5.", ".5", "1e3", "1.5f", " 7",
    "NaN", "Infinity", "-Infinity", "abc", "", "true", "TRUE", "false", "x'y", "ab", "\u00e9b",
]
STRING_LITERALS = ["abc", "5", "true", "", "x'y", "1.5", "b", "ab", "\u00e9"]
INT_LITERALS = [0, 1, 3, 5, 7, 2147483647, 2147483648, 9223372036854775807]
DOUBLE_LITERALS = [1.5, 5.0, 1e-05, 2.5e10, 5e-324, 1e308, 0.5]


class Abort(Exception):
    """Where Java throws: the whole message is not matched."""


# --- Java conversions, from the JDK's documented grammar -------------------------------
def parse_int(s: str, bits: int) -> int:
    if not re.fullmatch(r"[+-]?[0-9]+", s):
        raise Abort
    value = int(s)
    if not -(2 ** (bits - 1)) <= value < 2 ** (bits - 1):
        raise Abort
    return value


def parse_double(s: str) -> float:
    s = s.strip("".join(map(chr, range(33))))
    m = re.fullmatch(r"([+-]?)(NaN|Infinity|(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)([fFdD]?)", s)
    if not m or (m.group(2) in ("NaN", "Infinity") and m.group(3)):
        raise Abort
    if m.group(2) == "NaN":
        return math.nan
    if m.group(2) == "Infinity":
        return -math.inf if m.group(1) == "-" else math.inf
    return float(m.group(1) + m.group(2))


def double_order(x: float) -> tuple:
    # Double.compare: NaN above everything, -0.0 below 0.0.
    return (2,) if math.isnan(x) else (1, x, math.copysign(1.0, x))


def dcmp(x: float, y: float) -> int:
    a, b = double_order(x), double_order(y)
    return (a > b) - (a < b)


def cmp(a, b) -> int:
    return (a > b) - (a < b)


def java_compare(l, r) -> int:
    """ComparisonExpression's compare of two non-null typed values (kind, value)."""
    (lk, lv), (rk, rv) = l, r
    if lk == rk:
        return dcmp(lv, rv) if lk == "D" else cmp(lv, rv)
    if lk == "B":
        if rk == "S":
            raise Abort  # RocketMQ casts the Boolean to String
        return -1
    if lk == "S":
        if rk == "B":
            return cmp(lv.lower() == "true", rv)
        if rk == "D":
            return dcmp(parse_double(lv), rv)
        return cmp(parse_int(lv, 32 if rk == "I" else 64), rv)
    if rk == "S":
        if lk == "D":
            return dcmp(lv, parse_double(rv))
        return cmp(lv, parse_int(rv, 32 if lk == "I" else 64))
    if rk == "B":
        return -1
    if "D" in (lk, rk):
        return dcmp(float(lv), float(rv))
    return cmp(lv, rv)


# --- the reference interpreter ----------------------------------------------------------
def value_of(node, props, tags):
    kind = node[0]
    if kind == "prop":
        v = props.get(node[1], tags if node[1] == "TAGS" else None)
        return None if v is None else ("S", v)
    if kind == "str":
        return ("S", node[1])
    if kind == "num":
        n = node[1]
        if isinstance(n, float):
            return ("D", n)
        return ("I" if n < 2**31 else "L", n)
    if kind == "neg":
        inner = value_of(node[1], props, tags)
        if inner is None or inner[0] not in ("I", "L", "D"):
            return None
        return (inner[0], -inner[1])
    if kind == "bool":
        return ("B", node[1])
    result = truth(node, props, tags)
    return None if result is None else ("B", result)


def truth(node, props, tags):
    kind = node[0]
    if kind == "cmp":
        _, op, left, right = node
        l = value_of(left, props, tags)
        if l is None:
            return None
        r = value_of(right, props, tags)
        if r is None:
            return None
        if l[0] == "S" and r[0] == "S":
            c = dcmp(parse_double(l[1]), parse_double(r[1]))
        else:
            c = java_compare(l, r)
        return {">": c > 0, ">=": c >= 0, "<": c < 0, "<=": c <= 0}[op]
    if kind in ("eq", "ne"):
        l = value_of(node[1], props, tags)
        r = value_of(node[2], props, tags)
        if l is None and r is None:
            eq = True
        elif l is None:
            eq = None
        elif r is None:
            eq = False
        elif l[0] == r[0] and (l[1] == r[1] if l[0] != "D" else dcmp(l[1], r[1]) == 0):
            eq = True
        else:
            eq = java_compare(l, r) == 0
        return eq if kind == "eq" or eq is None else not eq
    if kind == "isnull":
        is_null = value_of(node[1], props, tags) is None
        return is_null != node[2]
    if kind == "strtest":
        _, op, negated, operand, search = node
        if search == "":
            return False
        v = value_of(operand, props, tags)
        if v is None or v[0] != "S":
            return False
        hit = {"CONTAINS": search in v[1], "STARTSWITH": v[1].startswith(search),
               "ENDSWITH": v[1].endswith(search)}[op]
        return hit != negated
    if kind == "in":
        v = value_of(node[1], props, tags)
        return None if v is None else (v[1] in node[2]) != node[3]
    if kind == "between":
        _, value, low, high, negated = node
        if negated:
            return truth(("or", ("cmp", "<", value, low), ("cmp", ">", value, high)), props, tags)
        return truth(("and", ("cmp", ">=", value, low), ("cmp", "<=", value, high)), props, tags)
    if kind == "not":
        v = truth(node[1], props, tags)
        return None if v is None else not v
    if kind == "and":
        l = truth(node[1], props, tags)
        if l is False:
            return False
        r = truth(node[2], props, tags)
        if r is False:
            return False
        return None if l is None or r is None else True
    if kind == "or":
        l = truth(node[1], props, tags)
        if l is True:
            return True
        r = truth(node[2], props, tags)
        if r is True:
            return True
        return None if l is None or r is None else False
    if kind == "prop":  # a bare property used as a condition
        return None if value_of(node, props, tags) is None else False
    assert kind == "bool"
    return node[1]


def reference_match(node, props, tags) -> bool:
    try:
        return truth(node, props, tags) is True
    except Abort:
        return False


# --- rendering to SQL text ----------------------------------------------------------------
def quote(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


def render(node, kw) -> str:
    kind = node[0]
    if kind == "prop":
        return node[1]
    if kind == "str":
        return quote(node[1])
    if kind == "num":
        return repr(node[1]) if isinstance(node[1], float) else str(node[1])
    if kind == "neg":
        return "- " + render(node[1], kw)
    if kind == "bool":
        return kw("TRUE" if node[1] else "FALSE")
    if kind == "cmp":
        return f"({render(node[2], kw)} {node[1]} {render(node[3], kw)})"
    if kind in ("eq", "ne"):
        op = "=" if kind == "eq" else "<>"
        return f"({render(node[1], kw)} {op} {render(node[2], kw)})"
    if kind == "isnull":
        return f"({render(node[1], kw)} {kw('IS')} {kw('NOT') + ' ' if node[2] else ''}{kw('NULL')})"
    if kind == "strtest":
        _, op, negated, operand, search = node
        return f"({render(operand, kw)} {kw('NOT') + ' ' if negated else ''}{kw(op)} {quote(search)})"
    if kind == "in":
        items = ", ".join(quote(v) for v in sorted(node[2]))
        return f"({render(node[1], kw)} {kw('NOT') + ' ' if node[3] else ''}{kw('IN')} ({items}))"
    if kind == "between":
        _, value, low, high, negated = node
        not_ = kw("NOT") + " " if negated else ""
        return f"({render(value, kw)} {not_}{kw('BETWEEN')} {render(low, kw)} {kw('AND')} {render(high, kw)})"
    if kind == "not":
        return f"({kw('NOT')} {render(node[1], kw)})"
    return f"({render(node[1], kw)} {kw(kind.upper())} {render(node[2], kw)})"


# --- strategies --------------------------------------------------------------------------
props_ = st.builds(lambda n: ("prop", n), st.sampled_from(PROPERTY_NAMES))
strings = st.builds(lambda s: ("str", s), st.sampled_from(STRING_LITERALS))
numbers = st.builds(lambda n: ("num", n), st.sampled_from(INT_LITERALS + DOUBLE_LITERALS))
negated_numbers = st.builds(lambda n: ("neg", n), numbers)
booleans = st.builds(lambda b: ("bool", b), st.booleans())
# Operands RocketMQ allows in > >= < <= : properties and numbers (and minus of anything).
ordering_operands = st.one_of(props_, numbers, negated_numbers, st.builds(lambda p: ("neg", p), props_))


def java_below(a, b) -> bool:
    return float(a) < float(b) if isinstance(a, float) or isinstance(b, float) else a < b


def conditions(children):
    operands = st.one_of(props_, strings, numbers, negated_numbers, booleans, children)
    comparison = st.builds(
        lambda op, l, r: ("cmp", op, l, r),
        st.sampled_from([">", ">=", "<", "<="]), ordering_operands, ordering_operands,
    )
    equality = st.builds(
        lambda kind, l, r: (kind, l, r), st.sampled_from(["eq", "ne"]), operands, operands
    ).filter(lambda n: not (n[1][0] == "bool" and n[2][0] in ("str", "num")))
    is_null = st.builds(lambda o, n: ("isnull", o, n), operands, st.booleans())
    string_test = st.builds(
        lambda op, n, o, s: ("strtest", op, n, o, s),
        st.sampled_from(["CONTAINS", "STARTSWITH", "ENDSWITH"]), st.booleans(),
        st.one_of(props_, strings, numbers, children), st.sampled_from(STRING_LITERALS),
    )
    in_list = st.builds(
        lambda p, vs, n: ("in", p, frozenset(vs), n),
        props_, st.lists(st.sampled_from(PROPERTY_VALUES), min_size=1, max_size=4), st.booleans(),
    )
    between = st.builds(
        lambda v, lo, hi, n: ("between", v, lo, hi, n),
        ordering_operands, st.one_of(numbers, negated_numbers), st.one_of(numbers, negated_numbers),
        st.booleans(),
    ).filter(  # RocketMQ rejects constant bounds in the wrong order (plain BETWEEN only)
        lambda n: n[4] or n[2][0] != "num" or n[3][0] != "num" or not java_below(n[3][1], n[2][1])
    )
    logic_operands = st.one_of(props_, children)
    logic = st.one_of(
        st.builds(lambda o: ("not", o), logic_operands),
        st.builds(lambda k, l, r: (k, l, r), st.sampled_from(["and", "or"]), logic_operands, logic_operands),
    )
    return st.one_of(comparison, equality, is_null, string_test, in_list, between, logic, booleans)


leaf_conditions = conditions(st.nothing())
expressions = st.recursive(leaf_conditions, conditions, max_leaves=12)
property_maps = st.dictionaries(st.sampled_from(PROPERTY_NAMES), st.sampled_from(PROPERTY_VALUES), max_size=4)
keyword_case = st.sampled_from([str.upper, str.lower, str.title])


@SETTINGS
@given(expressions, st.lists(property_maps, min_size=1, max_size=6), st.one_of(st.none(), st.sampled_from(PROPERTY_VALUES)), keyword_case)
def test_compiled_filter_agrees_with_reference(tree, messages, tags, kw):
    text = render(tree, kw)
    compiled = compile_filter("SQL92", text)
    for props in messages:
        assert compiled.match(tags, props) == reference_match(tree, props, tags), (text, props, tags)
        raw = encode_properties(props)
        assert compiled.raw_matcher(raw) == reference_match(tree, props, props.get("TAGS")), (text, raw)


# --- precedence: minimal parentheses mean the same as full ones ----------------------------
atoms = st.one_of(
    st.builds(lambda p, n: ("cmp", ">", p, ("num", n)), props_, st.sampled_from([0, 3, 5])),
    st.builds(lambda p, s: ("eq", p, ("str", s)), props_, st.sampled_from(STRING_LITERALS)),
    st.builds(lambda p: ("isnull", p, False), props_),
    props_,
)
logic_trees = st.recursive(
    atoms,
    lambda c: st.one_of(
        st.builds(lambda o: ("not", o), c),
        st.builds(lambda k, l, r: (k, l, r), st.sampled_from(["and", "or"]), c, c),
    ),
    max_leaves=10,
)


def render_minimal(node) -> str:
    """Only the parentheses RocketMQ's precedence needs (OR < AND < comparisons < NOT)."""
    kind = node[0]
    if kind == "cmp":
        return f"{node[2][1]} > {node[3][1]}"
    if kind == "eq":
        return f"{node[1][1]} = {quote(node[2][1])}"
    if kind == "isnull":
        return f"{node[1][1]} IS NULL"
    if kind == "prop":
        return node[1]
    if kind == "not":  # NOT binds tighter than comparisons, so anything but a name needs ()
        inner = render_minimal(node[1])
        return f"NOT {inner}" if node[1][0] in ("prop", "not") else f"NOT ({inner})"
    left, right = render_minimal(node[1]), render_minimal(node[2])
    if kind == "and":
        left = f"({left})" if node[1][0] == "or" else left
        right = f"({right})" if node[2][0] in ("or", "and") else right
        return f"{left} AND {right}"
    right = f"({right})" if node[2][0] == "or" else right
    return f"{left} OR {right}"


@SETTINGS
@given(logic_trees, st.lists(property_maps, min_size=1, max_size=6))
def test_minimal_parentheses_follow_precedence(tree, messages):
    minimal = compile_filter("SQL92", render_minimal(tree))
    for props in messages:
        assert minimal.match(None, props) == reference_match(tree, props, None), (render_minimal(tree), props)
        expected = reference_match(tree, props, props.get("TAGS"))
        assert minimal.raw_matcher(encode_properties(props)) == expected, (render_minimal(tree), props)
