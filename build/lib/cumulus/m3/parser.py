"""M3 text -> AST (cumulus/m3/ast.py). A hand-written tokenizer and recursive-descent
parser; every node keeps its line and column, and errors say "what. line N, col M" with
the offending text marked. Identifiers are case-insensitive and stored in lower case.

Grammar (the paper's Figure 1, plus declarations, general IF conditions and functions):

    program   := (decl | trigger)*
    decl      := DECLARE MAP name '[' (var ':' type),* ']' ':' type ';'
    trigger   := ON ('+'|'-') relation '(' var,* ')' DO '{' (stmt ';')* '}'
    stmt      := mapref '+=' expr
    expr      := term (('+'|'-') term)*
    term      := unary ('*' unary)*
    unary     := '-' unary | primary
    primary   := number | string | DATE 'yyyy-mm-dd' | mapref | var | FUNC '(' expr,* ')'
               | IF cond THEN expr ELSE expr | '(' expr ')'
    mapref    := name '[' expr,* ']'
    cond      := conj (OR conj)* ;  conj := neg (AND neg)* ;  neg := NOT neg | '(' cond ')'
               | expr CMP expr | expr IS [NOT] NULL | expr [NOT] LIKE 'pattern'
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass
from decimal import Decimal

from cumulus.errors import M3SyntaxError, Position
from cumulus.m3.ast import (
    COMPARISONS,
    FUNCTIONS,
    And,
    BinOp,
    Call,
    Cmp,
    Cond,
    Const,
    Expr,
    If,
    IsNull,
    Like,
    MapDecl,
    MapRef,
    Neg,
    Not,
    Or,
    Program,
    Statement,
    Trigger,
    Var,
)
from cumulus.schema import BOOL, DATE, DECIMAL, FLOAT, INT, NULL, STRING

KEYWORDS = {
    "ON", "DO", "IF", "THEN", "ELSE", "AND", "OR", "NOT", "IS", "NULL", "DECLARE", "MAP", "DATE", "LIKE",
    "TRUE", "FALSE",
}
TYPE_NAMES = {
    "INT": INT, "INTEGER": INT, "BIGINT": INT, "DECIMAL": DECIMAL, "FLOAT": FLOAT,
    "DOUBLE": FLOAT, "STRING": STRING, "VARCHAR": STRING, "DATE": DATE, "BOOL": BOOL,
    "BOOLEAN": BOOL,
}

_TOKEN = re.compile(
    r"""
    (?P<ws>\s+|--[^\n]*)
  | (?P<number>\d+\.\d*(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?|\d+(?:[eE][+-]?\d+)?)
  | (?P<string>'(?:[^']|'')*')
  | (?P<ident>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<op>\+=|<>|!=|<=|>=|[-+*/=<>(){}\[\],;:])
    """,
    re.VERBOSE,
)


@dataclass(frozen=True)
class Token:
    kind: str  # number, string, ident, keyword, op, eof
    text: str
    pos: Position


def tokenize(text: str, source: str = "") -> list[Token]:
    tokens: list[Token] = []
    line, line_start, i = 1, 0, 0
    while i < len(text):
        m = _TOKEN.match(text, i)
        pos = Position(line, i - line_start + 1, source)
        if m is None:
            what = "unterminated string constant" if text[i] == "'" else f"unexpected character {text[i]!r}"
            raise M3SyntaxError(what, pos, text)
        kind = m.lastgroup
        value = m.group()
        if kind != "ws":
            if kind == "ident" and value.upper() in KEYWORDS:
                kind, value = "keyword", value.upper()
            elif kind == "op" and value == "!=":
                value = "<>"
            tokens.append(Token(kind, value, pos))
        newlines = value.count("\n") if kind == "ws" else 0
        if newlines:
            line += newlines
            line_start = i + value.rindex("\n") + 1
        i = m.end()
    tokens.append(Token("eof", "", Position(line, i - line_start + 1, source)))
    return tokens


def _describe(tok: Token) -> str:
    return "end of input" if tok.kind == "eof" else repr(tok.text)


class _Parser:
    def __init__(self, text: str, source: str):
        self.text = text
        self.tokens = tokenize(text, source)
        self.i = 0

    # -- token helpers
    @property
    def tok(self) -> Token:
        return self.tokens[self.i]

    def error(self, what: str, tok: Token | None = None) -> M3SyntaxError:
        tok = tok or self.tok
        return M3SyntaxError(what, tok.pos, self.text, max(1, len(tok.text)))

    def at(self, kind: str, text: str | None = None) -> bool:
        return self.tok.kind == kind and (text is None or self.tok.text == text)

    def accept(self, kind: str, text: str | None = None) -> Token | None:
        if self.at(kind, text):
            tok = self.tok
            self.i += 1
            return tok
        return None

    def expect(self, kind: str, text: str | None = None, what: str | None = None) -> Token:
        tok = self.accept(kind, text)
        if tok is None:
            wanted = what or (repr(text) if text else kind)
            raise self.error(f"expected {wanted}, found {_describe(self.tok)}")
        return tok

    def name(self, what: str) -> Token:
        if self.tok.kind != "ident":
            raise self.error(f"expected {what}, found {_describe(self.tok)}")
        return self.expect("ident")

    # -- program
    def program(self) -> Program:
        decls: list[MapDecl] = []
        triggers: list[Trigger] = []
        while not self.at("eof"):
            if self.at("keyword", "DECLARE"):
                decls.append(self.decl())
            elif self.at("keyword", "ON"):
                triggers.append(self.trigger())
            else:
                raise self.error(f"expected ON or DECLARE, found {_describe(self.tok)}")
        return Program(tuple(decls), tuple(triggers))

    def type_name(self) -> str:
        tok = self.tok
        if tok.kind not in ("ident", "keyword") or tok.text.upper() not in TYPE_NAMES:
            raise self.error(f"expected a type ({', '.join(sorted(TYPE_NAMES))}), found {_describe(tok)}")
        self.i += 1
        return TYPE_NAMES[tok.text.upper()]

    def decl(self) -> MapDecl:
        start = self.expect("keyword", "DECLARE")
        self.expect("keyword", "MAP")
        name = self.name("a map name").text.lower()
        self.expect("op", "[")
        keys: list[tuple[str, str]] = []
        while not self.at("op", "]"):
            if keys:
                self.expect("op", ",")
            key = self.name("a key name").text.lower()
            self.expect("op", ":")
            keys.append((key, self.type_name()))
        self.expect("op", "]")
        self.expect("op", ":")
        type_ = self.type_name()
        self.expect("op", ";")
        return MapDecl(name, tuple(keys), type_, start.pos)

    def trigger(self) -> Trigger:
        start = self.expect("keyword", "ON")
        sign_tok = self.tok
        if not (self.accept("op", "+") or self.accept("op", "-")):
            raise self.error(f"expected '+' or '-' before the relation, found {_describe(sign_tok)}")
        relation = self.name("a relation name").text.lower()
        self.expect("op", "(")
        params: list[str] = []
        while not self.at("op", ")"):
            if params:
                self.expect("op", ",")
            tok = self.name("a variable name")
            if tok.text.lower() in params:
                raise self.error(f"variable {tok.text} appears twice in the trigger's arguments", tok)
            params.append(tok.text.lower())
        self.expect("op", ")")
        self.expect("keyword", "DO")
        self.expect("op", "{")
        stmts: list[Statement] = []
        while not self.accept("op", "}"):
            if self.at("eof"):
                raise self.error("expected '}' to close the trigger")
            stmts.append(self.statement())
        return Trigger(sign_tok.text, relation, tuple(params), tuple(stmts), start.pos)

    def statement(self) -> Statement:
        tok = self.tok
        if not (tok.kind == "ident" and self.tokens[self.i + 1].text == "["):
            raise self.error(f"expected a statement 'map[keys] += expression', found {_describe(tok)}")
        target = self.mapref()
        self.expect("op", "+=", "'+='")
        expr = self.expr()
        self.expect("op", ";", "';' after the statement")
        return Statement(target, expr, tok.pos)

    # -- expressions
    def expr(self) -> Expr:
        left = self.term()
        while self.at("op", "+") or self.at("op", "-"):
            op = self.accept("op")
            left = BinOp(op.text, left, self.term(), op.pos)
        return left

    def term(self) -> Expr:
        left = self.unary()
        while self.at("op", "*") or self.at("op", "/"):
            op = self.accept("op")
            left = BinOp(op.text, left, self.unary(), op.pos)
        return left

    def unary(self) -> Expr:
        tok = self.accept("op", "-")
        if tok:
            if self.at("number"):  # a negative constant is one node: `-1`
                const = self.primary()
                return Const(-const.value, const.type, tok.pos)
            return Neg(self.unary(), tok.pos)
        return self.primary()

    def primary(self) -> Expr:
        tok = self.tok
        if tok.kind == "number":
            self.i += 1
            text = tok.text
            if "e" in text.lower():
                return Const(float(text), FLOAT, tok.pos)
            if "." in text:
                return Const(Decimal(text), DECIMAL, tok.pos)
            return Const(int(text), INT, tok.pos)
        if tok.kind == "string":
            self.i += 1
            return Const(tok.text[1:-1].replace("''", "'"), STRING, tok.pos)
        if self.accept("keyword", "DATE"):
            lit = self.expect("string", what="a date constant such as DATE '1995-03-15'")
            try:
                value = dt.date.fromisoformat(lit.text[1:-1])
            except ValueError:
                raise self.error(f"invalid date {lit.text}: expected 'yyyy-mm-dd'", lit) from None
            return Const(value, DATE, tok.pos)
        if self.accept("keyword", "NULL"):
            return Const(None, NULL, tok.pos)
        if self.at("keyword", "TRUE") or self.at("keyword", "FALSE"):
            self.i += 1
            return Const(tok.text.upper() == "TRUE", BOOL, tok.pos)
        if self.accept("keyword", "IF"):
            cond = self.cond()
            self.expect("keyword", "THEN")
            then = self.expr()
            self.expect("keyword", "ELSE")
            return If(cond, then, self.expr(), tok.pos)
        if self.accept("op", "("):
            inner = self.expr()
            self.expect("op", ")")
            return inner
        if tok.kind == "ident":
            nxt = self.tokens[self.i + 1]
            if nxt.text == "[":
                return self.mapref()
            if nxt.text == "(":
                return self.call()
            self.i += 1
            return Var(tok.text.lower(), tok.pos)
        raise self.error(f"expected an expression, found {_describe(tok)}")

    def args(self, close: str) -> tuple[Expr, ...]:
        out: list[Expr] = []
        while not self.at("op", close):
            if out:
                self.expect("op", ",", f"',' or '{close}'")
            out.append(self.expr())
        self.expect("op", close)
        return tuple(out)

    def mapref(self) -> MapRef:
        tok = self.expect("ident")
        self.expect("op", "[")
        return MapRef(tok.text.lower(), self.args("]"), tok.pos)

    def call(self) -> Call:
        tok = self.expect("ident")
        func = tok.text.upper()
        if func not in FUNCTIONS:
            raise self.error(f"unknown function {tok.text} (known: {', '.join(sorted(FUNCTIONS))})", tok)
        self.expect("op", "(")
        return Call(func, self.args(")"), tok.pos)

    # -- conditions
    def cond(self) -> Cond:
        left = self.conj()
        while self.at("keyword", "OR"):
            tok = self.accept("keyword")
            left = Or(left, self.conj(), tok.pos)
        return left

    def conj(self) -> Cond:
        left = self.neg()
        while self.at("keyword", "AND"):
            tok = self.accept("keyword")
            left = And(left, self.neg(), tok.pos)
        return left

    def neg(self) -> Cond:
        tok = self.accept("keyword", "NOT")
        if tok:
            return Not(self.neg(), tok.pos)
        if self.at("op", "("):
            # '(' opens either a nested condition or an arithmetic operand: try the
            # condition first and fall back to a comparison.
            saved = self.i
            self.i += 1
            try:
                inner = self.cond()
                self.expect("op", ")")
                if not self.at("op") or self.tok.text not in COMPARISONS + ("+", "-", "*", "/"):
                    return inner
            except M3SyntaxError:
                pass
            self.i = saved
        left = self.expr()
        tok = self.tok
        if self.accept("keyword", "IS"):
            negated = bool(self.accept("keyword", "NOT"))
            self.expect("keyword", "NULL", "NULL")
            return IsNull(left, negated, tok.pos)
        if self.at("keyword", "LIKE") or (self.at("keyword", "NOT") and self.tokens[self.i + 1].text.upper() == "LIKE"):
            negated = bool(self.accept("keyword", "NOT"))
            self.expect("keyword", "LIKE")
            pattern = self.expect("string", what="a pattern such as 'PROMO%'")
            return Like(left, pattern.text[1:-1].replace("''", "'"), negated, tok.pos)
        if tok.kind == "op" and tok.text in COMPARISONS:
            self.i += 1
            return Cmp(tok.text, left, self.expr(), tok.pos)
        raise self.error(
            f"expected a comparison ({' '.join(COMPARISONS)}), IS [NOT] NULL or [NOT] LIKE, found {_describe(tok)}"
        )


def parse_program(text: str, source: str = "") -> Program:
    """Parse an M3 program text; raises M3SyntaxError with the position marked."""
    return _Parser(text, source).program()


def parse_expr(text: str) -> Expr:
    parser = _Parser(text, "")
    expr = parser.expr()
    parser.expect("eof", what="end of input")
    return expr
