"""Parser for RocketMQ's SQL92 message selectors (its SelectorParser.jj grammar).

Tokens, precedence and the parse-time checks follow RocketMQ so an expression that a
RocketMQ broker accepts means the same here, and one it rejects is rejected here too (as a
`FilterError` with the character position). Precedence, loosest first: OR; AND; `=`,
`<>`, IS [NOT] NULL; `>` `>=` `<` `<=`, [NOT] BETWEEN, [NOT] IN, [NOT] CONTAINS /
STARTSWITH / ENDSWITH; unary `+`, `-`, NOT. Note that NOT binds tighter than comparisons:
`NOT a = 1` is `(NOT a) = 1`, as in RocketMQ.

One deliberate difference: RocketMQ stops at the end of the first complete expression and
ignores what follows (`a = 1 b = 2` filters on `a = 1`); we reject trailing input.
Nesting is bounded so hostile input cannot exhaust the stack. Parsing only, never I/O.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from rocketport.core.filter.base import FilterError
from rocketport.core.filter.java import DOUBLE_MIN_VALUE, INT_MAX, INT_MIN, LONG_MAX
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
    is_boolean,
)

MAX_NESTING = 100  # parentheses and prefix operators inside one another
MAX_TREE_DEPTH = 64  # depth of the resulting tree (bounds generated code and recursion)

KEYWORDS = frozenset(
    ("NOT", "AND", "OR", "BETWEEN", "IN", "TRUE", "FALSE", "NULL", "IS",
     "CONTAINS", "STARTSWITH", "ENDSWITH")
)
_STRING_TESTS = ("CONTAINS", "STARTSWITH", "ENDSWITH")
_NOT_SUFFIXES = frozenset(_STRING_TESTS + ("BETWEEN", "IN"))

# Alternatives are ordered so the first match is JavaCC's longest match. A `--` comment
# needs its line end, otherwise `--` is two minus signs, as in the JavaCC token manager.
_TOKEN = re.compile(
    r"""
    (?P<skip>[ \t\n\r\f]+|--[^\n\r]*(?:\r\n|\n|\r)|/\*.*?\*/)
  | (?P<float>[0-9]+\.[0-9]*(?:[eE][+-]?[0-9]+)?|\.[0-9]+(?:[eE][+-]?[0-9]+)?|[0-9]+[eE][+-]?[0-9]+)
  | (?P<int>0|[1-9][0-9]*[lL]?)
  | (?P<string>'(?:[^']|'')*')
  | (?P<word>[A-Za-z_$][A-Za-z0-9_$]*)
  | (?P<op><>|<=|>=|[=<>(),+-])
    """,
    re.VERBOSE | re.DOTALL,
)


@dataclass(frozen=True, slots=True)
class Token:
    kind: str  # "float", "int", "string", "id", "op", "EOF", or a keyword in upper case
    text: str
    position: int


def tokenize(expression: str) -> list[Token]:
    tokens: list[Token] = []
    position, end = 0, len(expression)
    while position < end:
        match = _TOKEN.match(expression, position)
        if match is None:
            raise FilterError(f"unexpected character {expression[position]!r}", position)
        kind = match.lastgroup
        text = match.group()
        if kind == "word":
            upper = text.upper()
            tokens.append(Token(upper if upper in KEYWORDS else "id", text, position))
        elif kind != "skip":
            tokens.append(Token(kind or "", text, position))
        position = match.end()
    tokens.append(Token("EOF", "", end))
    return tokens


def parse(expression: str) -> Node:
    """Parse a selector into a condition tree, or raise FilterError."""
    parser = _Parser(tokenize(expression))
    tree = parser.or_expression()
    if parser.peek.kind != "EOF":
        raise _unexpected(parser.peek)
    tree = _as_boolean(tree, 0)
    _check_depth(tree)
    return tree


def _unexpected(token: Token) -> FilterError:
    if token.kind == "EOF":
        return FilterError("unexpected end of expression", token.position)
    return FilterError(f"unexpected {token.text!r}", token.position)


class _Parser:
    __slots__ = ("_tokens", "_index", "_nesting", "peek")

    def __init__(self, tokens: list[Token]) -> None:
        self._tokens = tokens
        self._index = 0
        self._nesting = 0
        self.peek = tokens[0]

    def _advance(self) -> Token:
        token = self.peek
        self._index += 1
        self.peek = self._tokens[min(self._index, len(self._tokens) - 1)]
        return token

    def _lookahead(self, offset: int) -> Token:
        return self._tokens[min(self._index + offset, len(self._tokens) - 1)]

    def _expect(self, kind: str, text: str | None = None) -> Token:
        token = self.peek
        if token.kind != kind or (text is not None and token.text != text):
            raise _unexpected(token)
        return self._advance()

    def _at_op(self, *texts: str) -> bool:
        return self.peek.kind == "op" and self.peek.text in texts

    def or_expression(self) -> Node:
        left = self.and_expression()
        operands: list[Node] | None = None
        while self.peek.kind == "OR":
            position = self._advance().position
            right = self.and_expression()
            if operands is None:
                operands = _flatten(Or, _as_boolean(left, position))
            operands.extend(_flatten(Or, _as_boolean(right, position)))
            left = Or(tuple(operands), position)
        return left

    def and_expression(self) -> Node:
        left = self.equality_expression()
        operands: list[Node] | None = None
        while self.peek.kind == "AND":
            position = self._advance().position
            right = self.equality_expression()
            if operands is None:
                operands = _flatten(And, _as_boolean(left, position))
            operands.extend(_flatten(And, _as_boolean(right, position)))
            left = And(tuple(operands), position)
        return left

    def equality_expression(self) -> Node:
        left = self.comparison_expression()
        while True:
            token = self.peek
            if self._at_op("=", "<>"):
                self._advance()
                right = self.comparison_expression()
                equal = _equal(left, right, token.position)
                left = equal if token.text == "=" else Not(equal, token.position)
            elif token.kind == "IS":
                self._advance()
                negated = self.peek.kind == "NOT"
                if negated:
                    self._advance()
                self._expect("NULL")
                is_null = IsNull(left, token.position)
                left = Not(is_null, token.position) if negated else is_null
            else:
                return left

    def comparison_expression(self) -> Node:
        left = self.unary_expression()
        while True:
            token = self.peek
            if self._at_op(">", ">=", "<", "<="):
                self._advance()
                right = self.unary_expression()
                left = _compare(token.text, left, right, token.position)
                continue
            negated = token.kind == "NOT" and self._lookahead(1).kind in _NOT_SUFFIXES
            if negated:
                self._advance()
            keyword = self.peek.kind
            if keyword in _STRING_TESTS:
                self._advance()
                search = _string_value(self._expect("string"))
                left = StringTest(keyword.lower(), negated, left, search, token.position)
            elif keyword == "BETWEEN":
                self._advance()
                low = self.unary_expression()
                self._expect("AND")
                high = self.unary_expression()
                left = _between(left, low, high, negated, token.position)
            elif keyword == "IN":
                self._advance()
                left = self._in_list(left, negated, token.position)
            else:
                return left

    def _in_list(self, left: Node, negated: bool, position: int) -> Node:
        if not isinstance(left, Property):
            raise FilterError("IN needs a property on its left (NOT binds tighter: write x NOT IN)", position)
        self._expect("op", "(")
        values = [_string_value(self._expect("string"))]
        while self._at_op(","):
            self._advance()
            values.append(_string_value(self._expect("string")))
        self._expect("op", ")")
        return In(left, frozenset(values), negated, position)

    def unary_expression(self) -> Node:
        token = self.peek
        if self._at_op("+", "-") or token.kind == "NOT":
            self._advance()
            operand = self._nested(self.unary_expression, token)
            if token.text == "+":
                return operand
            if token.text == "-":
                return Negate(operand, token.position)
            return Not(_as_boolean(operand, token.position), token.position)
        return self.primary_expression()

    def primary_expression(self) -> Node:
        token = self._advance()
        kind = token.kind
        if kind == "id":
            return Property(token.text, token.position)
        if kind == "string":
            return Literal(_string_value(token), STRING, token.position)
        if kind == "int":
            return _integer_literal(token)
        if kind == "float":
            return _float_literal(token)
        if kind in ("TRUE", "FALSE"):
            return Literal(kind == "TRUE", BOOLEAN, token.position)
        if kind == "NULL":
            return Literal(None, NULL, token.position)
        if kind == "op" and token.text == "(":
            inner = self._nested(self.or_expression, token)
            self._expect("op", ")")
            return inner
        raise _unexpected(token)

    def _nested(self, parse_inner, token: Token) -> Node:
        self._nesting += 1
        if self._nesting > MAX_NESTING:
            raise FilterError("expression nested too deeply", token.position)
        try:
            return parse_inner()
        finally:
            self._nesting -= 1


def _string_value(token: Token) -> str:
    return token.text[1:-1].replace("''", "'")


def _integer_literal(token: Token) -> Literal:
    value = int(token.text.rstrip("lL"))
    if value > LONG_MAX:
        raise FilterError(f"integer {token.text} is out of Long range", token.position)
    return Literal(value, INT if INT_MIN <= value <= INT_MAX else LONG, token.position)


def _float_literal(token: Token) -> Literal:
    value = float(token.text)
    if value == float("inf"):
        raise FilterError(f"{token.text} is greater than Double.MAX_VALUE", token.position)
    if value < DOUBLE_MIN_VALUE:
        # RocketMQ checks against Double.MIN_VALUE, the smallest *positive* double, so a
        # 0.0 literal (or one that underflows to it) is rejected; write 0 instead.
        raise FilterError(f"{token.text} is less than Double.MIN_VALUE", token.position)
    return Literal(value, DOUBLE, token.position)


def _flatten(cls: type[And] | type[Or], node: Node) -> list[Node]:
    # Kleene AND/OR with left-to-right short-circuit is associative, evaluation order
    # included, so (a AND b) AND c is one three-operand node.
    return list(node.operands) if isinstance(node, cls) else [node]


def _as_boolean(node: Node, position: int) -> Node:
    if is_boolean(node):
        return node
    if isinstance(node, Property):
        return BoolCast(node, node.position)
    raise FilterError("expression will not result in a boolean value", position)


def _check_ordering_operand(node: Node, op: str, position: int) -> None:
    # RocketMQ: constants in > >= < <= must be numbers; conditions are never allowed.
    if isinstance(node, Literal) and node.kind not in NUMERIC:
        raise FilterError(f"{_describe(node)} cannot be compared with {op}", node.position)
    if is_boolean(node):
        raise FilterError(f"a condition cannot be compared with {op}", position)


def _describe(node: Literal) -> str:
    if node.kind == NULL:
        return "NULL"
    if node.kind == BOOLEAN:
        return "TRUE" if node.value else "FALSE"
    return f"{node.kind} literal"


def _compare(op: str, left: Node, right: Node, position: int) -> Compare:
    _check_ordering_operand(left, op, position)
    _check_ordering_operand(right, op, position)
    return Compare(op, left, right, position)


def _equal(left: Node, right: Node, position: int) -> Equal:
    for operand in (left, right):
        if isinstance(operand, Literal) and operand.kind == NULL:
            raise FilterError("NULL cannot be compared with =; use IS NULL", operand.position)
    if (
        isinstance(left, Literal)
        and isinstance(right, Literal)
        and left.kind == BOOLEAN
        and right.kind != BOOLEAN
    ):
        raise FilterError(f"{_describe(left)} cannot be compared with {_describe(right)}", position)
    return Equal(left, right, position)


def _between(value: Node, low: Node, high: Node, negated: bool, position: int) -> Node:
    if negated:
        return Or(
            (_compare("<", value, low, position), _compare(">", value, high, position)), position
        )
    if isinstance(low, Literal) and isinstance(high, Literal):
        if low.kind == NULL or high.kind == NULL:
            raise FilterError("BETWEEN bounds cannot be NULL", position)
        if low.kind in NUMERIC and high.kind in NUMERIC and _below(high, low):
            raise FilterError(
                f"BETWEEN lower bound {low.value} is greater than upper bound {high.value}",
                position,
            )
    return And(
        (_compare(">=", value, low, position), _compare("<=", value, high, position)), position
    )


def _below(a: Literal, b: Literal) -> bool:
    # Java compares Integer with Long exactly and converts to double when either is one.
    if DOUBLE in (a.kind, b.kind):
        return float(a.value) < float(b.value)  # type: ignore[arg-type]
    return a.value < b.value  # type: ignore[operator]


def _check_depth(tree: Node) -> None:
    stack: list[tuple[Node, int]] = [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_TREE_DEPTH:
            raise FilterError("expression nested too deeply", getattr(node, "position", 0))
        stack.extend((child, depth + 1) for child in children(node))

