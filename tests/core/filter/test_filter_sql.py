"""Unit tests for SQL92 filters: each operator, RocketMQ's conversions, precedence, errors."""

from __future__ import annotations

import pytest

from rocketport.core.filter import FilterError, SqlFilter, compile_filter
from rocketport.core.filter.sql_parser import MAX_NESTING, MAX_TREE_DEPTH


def matches(expression: str, tags: str | None = None, **props: str) -> bool:
    return compile_filter("SQL92", expression).match(tags, props)


@pytest.mark.parametrize(
    "expression, props, expected",
    [
        # numbers: the property is converted with the literal's Java type
        ("a > 5", {"a": "6"}, True),
        ("a > 5", {"a": "5"}, False),
        ("a >= 5", {"a": "5"}, True),
        ("a < 5", {"a": "-7"}, True),
        ("a <= -5", {"a": "-5"}, True),
        ("a = 5", {"a": "+5"}, True),
        ("a = 5", {"a": "005"}, True),
        ("a <> 5", {"a": "6"}, True),
        ("a > 5", {"a": "5.5"}, False),  # Integer.valueOf("5.5") throws
        ("a > 5 OR b = 'x'", {"a": "5.5", "b": "x"}, False),  # ... and aborts the whole filter
        ("b = 'x' OR a > 5", {"a": "5.5", "b": "x"}, True),  # unless short-circuit skips it
        ("a > 5", {"a": " 6"}, False),  # no whitespace in Integer.valueOf
        ("a > 5.0", {"a": " 6 "}, True),  # Double.valueOf trims
        ("a > 5.0", {"a": "5.5"}, True),
        ("a > 5.0", {"a": "6d"}, True),
        ("a > 5.0", {"a": "NaN"}, True),  # Double.compare puts NaN above everything
        ("a < 5.0", {"a": "-Infinity"}, True),
        ("a > 5", {"a": "2147483648"}, False),  # Integer overflow throws
        ("a > 2147483648", {"a": "2147483649"}, True),  # a Long literal converts as Long
        ("a > 5L", {"a": "6"}, True),
        ("a = 9223372036854775807", {"a": "9223372036854775807"}, True),
        ("a > 1.5", {"a": "x"}, False),
        ("a > b", {"a": "10", "b": "9.5"}, True),  # two strings: both parsed as doubles
        ("a > b", {"a": "abc", "b": "1"}, False),
        ("a = 1.5", {"a": "1.50"}, True),
        ("5 = 5.0", {}, True),
        ("1 < 2", {}, True),
        ("- -5 = 5", {}, True),
        ("a = -5", {"a": "-5"}, True),
        # strings
        ("a = 'x'", {"a": "x"}, True),
        ("a = 'x'", {"a": "X"}, False),
        ("a <> 'x'", {"a": "y"}, True),
        ("a = 'it''s'", {"a": "it's"}, True),
        ("a = b", {"a": "p", "b": "p"}, True),
        ("a = '5'", {"a": "5.0"}, False),
        # booleans
        ("a = TRUE", {"a": "TrUe"}, True),
        ("a = TRUE", {"a": "yes"}, False),
        ("a = FALSE", {"a": "yes"}, True),  # Boolean.valueOf("yes") is false
        ("TRUE = a", {"a": "true"}, False),  # RocketMQ throws comparing Boolean with String
        ("TRUE", {}, True),
        ("FALSE", {}, False),
        ("TRUE = FALSE", {}, False),
        ("5 = TRUE", {}, False),  # incomparable types are simply unequal
        ("5 <> TRUE", {}, True),
        ("(a > 1) = (b > 1)", {"a": "2", "b": "3"}, True),
        ("a", {"a": "true"}, False),  # a bare property is a (string-typed) condition: false
        # BETWEEN
        ("a BETWEEN 1 AND 5", {"a": "1"}, True),
        ("a BETWEEN 1 AND 5", {"a": "5"}, True),
        ("a BETWEEN 1 AND 5", {"a": "6"}, False),
        ("a BETWEEN 1 AND 5.5", {"a": "5.25"}, False),  # 1 converts a as Integer: throws
        ("a BETWEEN 1.0 AND 5.5", {"a": "5.25"}, True),
        ("a NOT BETWEEN 1 AND 5", {"a": "6"}, True),
        ("a NOT BETWEEN 1 AND 5", {"a": "3"}, False),
        ("a BETWEEN 1 AND 5 AND b = 'x'", {"a": "3", "b": "x"}, True),
        # IN
        ("a IN ('x', 'y')", {"a": "y"}, True),
        ("a IN ('x', 'y')", {"a": "z"}, False),
        ("a NOT IN ('x', 'y')", {"a": "z"}, True),
        ("a NOT IN ('x')", {}, False),
        ("a IN ('1')", {"a": "1.0"}, False),
        # IS NULL
        ("a IS NULL", {}, True),
        ("a IS NULL", {"a": ""}, False),
        ("a IS NOT NULL", {"a": ""}, True),
        ("(a > 5) IS NULL", {}, True),
        # CONTAINS / STARTSWITH / ENDSWITH
        ("a CONTAINS 'ell'", {"a": "hello"}, True),
        ("a NOT CONTAINS 'ell'", {"a": "hello"}, False),
        ("a NOT CONTAINS 'x'", {}, False),  # null is never a string
        ("NOT (a CONTAINS 'x')", {}, True),  # ... so its negation is true
        ("a CONTAINS ''", {"a": "hello"}, False),  # empty search is false
        ("a NOT CONTAINS ''", {"a": "hello"}, False),
        ("a STARTSWITH 'he'", {"a": "hello"}, True),
        ("a NOT STARTSWITH 'he'", {"a": "hello"}, False),
        ("a ENDSWITH 'lo'", {"a": "hello"}, True),
        ("a NOT ENDSWITH 'x'", {"a": "hello"}, True),
        ("'hello' CONTAINS 'ell'", {}, True),
        ("5 CONTAINS '5'", {}, False),
        # missing properties: unknown, and unknown never matches
        ("a > 5", {}, False),
        ("NOT (a > 5)", {}, False),
        ("a = 'x'", {}, False),
        ("a <> 'x'", {}, False),
        ("'x' <> a", {}, True),  # RocketMQ: right side null is false, so <> is true
        ("a = b", {}, True),  # both null compare equal
        ("('x' = a) IS NULL", {}, False),  # only the right side null: false, not unknown
        ("(a = 'x') IS NULL", {}, True),  # only the left side null: unknown
        ("9007199254740993 > 9007199254740992.0", {}, False),  # Java widens Long to double
        ("9007199254740993 = 9007199254740992.0", {}, True),
        ("a = b", {"b": "x"}, False),
        ("a IN ('x')", {}, False),
        # three-valued logic
        ("a > 5 OR b = 'x'", {"b": "x"}, True),
        ("a > 5 AND b = 'x'", {"b": "x"}, False),
        ("NOT (a > 5 AND b = 'x')", {"b": "y"}, True),  # unknown AND false is false
        ("NOT (a > 5 OR b = 'x')", {"b": "y"}, False),  # unknown OR false is unknown
        # keywords are case-insensitive, identifiers are not
        ("a between 1 and 5 and b is not null", {"a": "2", "b": ""}, True),
        ("A > 5", {"a": "6"}, False),
        # comments and whitespace as in the JavaCC grammar
        ("a > 5 -- trailing comment\n", {"a": "6"}, True),
        ("a /* inline */ > 5", {"a": "6"}, True),
        ("\ta\r\n>\f5", {"a": "6"}, True),
    ],
)
def test_operator_semantics(expression, props, expected):
    assert matches(expression, **props) is expected


def test_tags_are_the_tags_property():
    assert matches("TAGS = 'TagA'", tags="TagA")
    assert not matches("TAGS = 'TagA'", tags="TagB")
    assert not matches("TAGS IS NOT NULL")
    assert matches("TAGS IN ('TagA', 'TagB')", tags="TagB", TAGS="TagB")


def test_sql_filter_never_prefilters_by_tags_code():
    sql = compile_filter("sql92", "a > 5")
    assert isinstance(sql, SqlFilter)
    assert sql.expression_type == "SQL92"
    assert sql.expression == "a > 5"
    assert sql.match_tags_code(0) and sql.match_tags_code(-123456)


@pytest.mark.parametrize(
    "minimal, explicit",
    [
        ("a = 1 OR b = 1 AND c = 1", "a = 1 OR (b = 1 AND c = 1)"),
        ("a = 1 AND b = 1 OR c = 1", "(a = 1 AND b = 1) OR c = 1"),
        ("NOT a = 1 OR b = 1", "((NOT a) = 1) OR b = 1"),  # NOT binds tighter than =
        ("a IS NULL = TRUE", "(a IS NULL) = TRUE"),
        ("a > 1 = TRUE", "(a > 1) = TRUE"),
    ],
)
def test_precedence(minimal, explicit):
    cases = [{}, {"a": "1"}, {"b": "1"}, {"c": "1"}, {"b": "1", "c": "1"}, {"a": "2", "c": "1"}]
    for props in cases:
        assert matches(minimal, **props) == matches(explicit, **props), props
    assert matches("a = 1 OR b = 1 AND c = 1", a="1")
    assert not matches("(a = 1 OR b = 1) AND c = 1", a="1")


def test_long_chains_compile_and_evaluate():
    expression = " OR ".join(f"p{i} = '{i}'" for i in range(2000))
    assert matches(expression, p1999="1999")
    assert not matches(expression, p1999="x")


@pytest.mark.parametrize(
    "expression, position, fragment",
    [
        ("", 0, "unexpected end"),
        ("a >", 3, "unexpected end"),
        ("a > 5 b = 1", 6, "unexpected 'b'"),  # RocketMQ would silently ignore 'b = 1'
        ("a ! 5", 2, "unexpected character '!'"),
        ("a != 5", 2, "unexpected character '!'"),
        ("a = 'open", 4, "unexpected character"),
        ("a > 'x'", 4, "String literal cannot be compared"),
        ("a > TRUE", 4, "TRUE cannot be compared"),
        ("a > NULL", 4, "NULL cannot be compared"),
        ("(a = 1) > 5", 8, "a condition cannot be compared"),
        ("NOT a > 5", 6, "a condition cannot be compared"),
        ("a = NULL", 4, "use IS NULL"),
        ("TRUE = 5", 5, "TRUE cannot be compared with Integer literal"),
        ("NOT c IN ('x')", 6, "IN needs a property"),
        ("5 IN ('x')", 2, "IN needs a property"),
        ("a IN (5)", 6, "unexpected '5'"),
        ("a IN ()", 6, "unexpected ')'"),
        ("a BETWEEN 5 AND 1", 2, "lower bound 5 is greater than upper bound 1"),
        ("a BETWEEN NULL AND 1", 2, "cannot be NULL"),
        ("a BETWEEN 1 OR 5", 12, "unexpected 'OR'"),
        ("a > 0.0", 4, "less than Double.MIN_VALUE"),  # RocketMQ rejects 0.0 literals
        ("a > 1e999", 4, "greater than Double.MAX_VALUE"),
        ("a > 9223372036854775808", 4, "out of Long range"),
        ("5", 0, "will not result in a boolean"),
        ("'x' AND a", 4, "will not result in a boolean"),
        ("NOT 5", 0, "will not result in a boolean"),
        ("a IS 5", 5, "unexpected '5'"),
        ("a CONTAINS b", 11, "unexpected 'b'"),
        ("a = 007", 5, "unexpected '0'"),
        ("a > 5 --no newline", 6, "unexpected '-'"),
        ("a = /* open", 4, "unexpected character '/'"),
        ("a.b = 1", 1, "unexpected character '.'"),
        ("(" * (MAX_NESTING + 1) + "a" + ")" * (MAX_NESTING + 1), MAX_NESTING, "nested too deeply"),
        ("a" + " = TRUE" * (MAX_TREE_DEPTH + 1), None, "nested too deeply"),
    ],
)
def test_errors_name_the_position(expression, position, fragment):
    with pytest.raises(FilterError) as caught:
        compile_filter("SQL92", expression)
    error = caught.value
    assert fragment in str(error)
    if position is not None:
        assert error.position == position
        assert f"at position {position}" in str(error)
    assert isinstance(error, ValueError)


def test_deepest_allowed_nesting_compiles():
    expression = "(" * MAX_NESTING + "a = 1" + ")" * MAX_NESTING
    assert matches(expression, a="1")
    chain = "a" + " = TRUE" * (MAX_TREE_DEPTH - 2)
    compile_filter("SQL92", chain)
    nots = "NOT " * (MAX_TREE_DEPTH - 2) + "(a = 1)"
    assert matches(nots, a="1") is (MAX_TREE_DEPTH % 2 == 0)


def test_expression_types():
    assert compile_filter(None, "TagA").expression_type == "TAG"
    assert compile_filter("", "TagA").expression_type == "TAG"
    assert compile_filter("tag", "TagA").expression_type == "TAG"
    assert compile_filter("Sql92", "a = 1").expression_type == "SQL92"
    with pytest.raises(FilterError) as caught:
        compile_filter("XPATH", "a")
    assert caught.value.position == 0 and "XPATH" in str(caught.value)
    with pytest.raises(FilterError):
        compile_filter("SQL92", None)
