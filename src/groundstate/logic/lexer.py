"""Tokens of the Mangle dialect, each with its position; bad input raises a positioned ParseError."""

from __future__ import annotations

import re
from typing import Any, NamedTuple

from .errors import ParseError, Position
from .values import INT64_MAX, INT64_MIN, Float, Name

# Token kinds
IDENT = "identifier"  # foo, foo.bar, fn:plus, :lt
VAR = "variable"
NAME = "name constant"
INT = "integer"
FLOAT = "float"
STRING = "string"
BYTES = "bytes"
KEYWORD = "keyword"
PUNCT = "punctuation"
EOF = "end of input"

KEYWORDS = {"Package", "Use", "Decl", "bound", "let", "do", "descr", "inclusion"}
_PUNCT2 = (":-", "|>", "!=", "<=", ">=")
_PUNCT1 = "()[]{},.!=<>:"
_NAME_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._~%-")
_IDENT_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_")
_DIGITS = frozenset("0123456789")
# The common tokens in one regex; anything else (escapes, bytes, '.5', '_', errors) takes the careful path.
_FAST = re.compile(
    r"""(?P<ws>(?:[ \t\r\n\f\v\ufeff]+|\#[^\n]*)+)"""
    r"""|(?P<name>/[A-Za-z0-9._~%-]+(?:/[A-Za-z0-9._~%-]+)*)"""
    r"""|(?P<float>-?(?:[0-9]+\.[0-9]+(?:[eE][+-]?[0-9]+)?|[0-9]+[eE][+-]?[0-9]+))"""
    r"""|(?P<int>-?[0-9]+)"""
    r"""|(?P<bytes>b["'`])"""
    r"""|(?P<word>:?[A-Za-z][A-Za-z0-9_]*(?:[.:][A-Za-z][A-Za-z0-9_]*)*)"""
    r"""|(?P<string>"[^"\\\n]*")"""
    r"""|(?P<punct>:-|\|>|!=|<=|>=|[()\[\]{},!=<>:]|\.(?![0-9]))"""
)
_SIMPLE_ESCAPES = {"n": "\n", "t": "\t", '"': '"', "'": "'", "\\": "\\", "r": "\r", "0": "\0"}


class Token(NamedTuple):
    kind: str
    text: str
    value: Any
    pos: Position

    def describe(self) -> str:
        if self.kind == EOF:
            return "end of input"
        return f"{self.kind} '{self.text}'"


class Lexer:
    def __init__(self, text: str, source: str) -> None:
        self.text = text
        self.source = source
        self.lines = text.split("\n")
        self.i = 0
        self._mark_offset = 0  # newlines are counted incrementally from here: positions stay O(1)
        self._mark_line = 1
        self._mark_line_start = 0

    def position(self, offset: int | None = None) -> Position:
        offset = self.i if offset is None else offset
        if offset < self._mark_offset:
            self._mark_offset, self._mark_line, self._mark_line_start = 0, 1, 0
        line = self._mark_line + self.text.count("\n", self._mark_offset, offset)
        newline = self.text.rfind("\n", self._mark_offset, offset)
        start = self._mark_line_start if newline < 0 else newline + 1
        self._mark_offset, self._mark_line, self._mark_line_start = offset, line, start
        line_text = self.lines[line - 1] if line - 1 < len(self.lines) else ""
        return Position(self.source, line, offset - start + 1, line_text)

    def error(self, message: str, offset: int | None = None) -> ParseError:
        return ParseError(message, self.position(offset))

    def tokens(self) -> list[Token]:
        """Every token, then EOF. The common tokens come from one regular expression (the fast path); anything
        else — comments, byte strings, unusual characters — from ``_next`` (the careful path, with the errors)."""
        text, n, lines, source = self.text, len(self.text), self.lines, self.source
        out: list[Token] = []
        append = out.append
        match = _FAST.match
        new = tuple.__new__
        i, line, line_start = 0, 1, 0
        while i < n:
            m = match(text, i)
            kind = m.lastgroup if m is not None else None
            if m is None or kind == "ws" or kind == "bytes":
                if m is not None and kind == "ws":
                    j = m.end()
                else:
                    self.i = i
                    append(self._next())
                    j = self.i
                newlines = text.count("\n", i, j)
                if newlines:
                    line += newlines
                    line_start = text.rfind("\n", i, j) + 1
                i = j
                continue
            j = m.end()
            raw = text[i:j]
            # tuple.__new__ directly: NamedTuple's own constructor is a Python call, too slow per token
            pos = new(Position, (source, line, i - line_start + 1, lines[line - 1]))
            if kind == "punct":
                append(new(Token, (PUNCT, raw, raw, pos)))
            elif kind == "name":
                append(new(Token, (NAME, raw, Name(raw), pos)))
            elif kind == "string":
                append(new(Token, (STRING, raw, raw[1:-1], pos)))
            elif kind == "word":
                append(self._fast_word(raw, pos, i))
            else:
                append(self._fast_number(kind, raw, pos, i, j))
            i = j
        self.i = n
        out.append(Token(EOF, "", None, self.position(n)))
        return out

    def _fast_word(self, raw: str, pos: Position, i: int) -> Token:
        if raw in KEYWORDS:
            return tuple.__new__(Token, (KEYWORD, raw, raw, pos))
        if not raw[0].isupper():
            return tuple.__new__(Token, (IDENT, raw, raw, pos))
        if "." in raw or ":" in raw:
            raise self.error(f"malformed variable '{raw}'", i)
        return tuple.__new__(Token, (VAR, raw, raw, pos))

    def _fast_number(self, kind: str | None, raw: str, pos: Position, i: int, j: int) -> Token:
        if j < len(self.text) and self.text[j] in _IDENT_CHARS:
            raise self.error(f"malformed number '{raw}{self.text[j]}'", i)
        if kind == "int":
            value = int(raw)
            if not INT64_MIN <= value <= INT64_MAX:
                raise self.error(f"integer literal {raw} does not fit in 64 bits", i)
            return tuple.__new__(Token, (INT, raw, value, pos))
        return tuple.__new__(Token, (FLOAT, raw, Float(float(raw)), pos))

    def _skip_space(self) -> None:
        text, n = self.text, len(self.text)
        while self.i < n:
            ch = text[self.i]
            if ch in " \t\r\n\f\v\ufeff":
                self.i += 1
            elif ch == "#":
                end = text.find("\n", self.i)
                self.i = n if end < 0 else end
            else:
                return

    def _next(self) -> Token:
        """The careful path: one token from ``self.i`` (after spaces and comments), or the error that says why not."""
        self._skip_space()
        text, start = self.text, self.i
        if start >= len(text):
            return Token(EOF, "", None, self.position(start))
        ch = text[start]
        nxt = text[start + 1] if start + 1 < len(text) else ""
        if ch == "/" and nxt in _NAME_CHARS and nxt != "":
            return self._name(start)
        if self._starts_number(start, ch, nxt):
            return self._number(start)
        if ch in "\"'`":
            return self._string(start, ch, is_bytes=False)
        if ch == "b" and nxt in "\"'`" and nxt != "":
            return self._string(start + 1, nxt, is_bytes=True)
        if (ch.isalpha() and ch.isascii()) or (ch == ":" and nxt.isascii() and nxt.isalpha()):
            return self._word(start)
        if ch == "_" and not (nxt in _IDENT_CHARS and nxt != ""):
            self.i += 1
            return Token(VAR, "_", "_", self.position(start))
        return self._punctuation(start, ch)

    def _starts_number(self, start: int, ch: str, nxt: str) -> bool:
        """A digit, a '-' before a digit or '.digit', or a '.digit' that does not end a clause."""
        if ch in _DIGITS:
            return True
        if ch == "-" and nxt != "":
            return nxt in _DIGITS or (nxt == "." and self._digit_at(start + 2))
        return ch == "." and self._digit_at(start + 1) and not self._follows_term(start)

    def _punctuation(self, start: int, ch: str) -> Token:
        if ch == "⟸":
            self.i += 1
            return Token(PUNCT, ":-", ":-", self.position(start))
        two = self.text[start : start + 2]
        if two in _PUNCT2:
            self.i += 2
            return Token(PUNCT, two, two, self.position(start))
        if ch in _PUNCT1:
            self.i += 1
            return Token(PUNCT, ch, ch, self.position(start))
        if ch == "_":
            raise self.error("variables start with an upper-case letter; '_' alone is the wildcard", start)
        raise self.error(f"unexpected character {ch!r}", start)

    def _digit_at(self, offset: int) -> bool:
        return offset < len(self.text) and self.text[offset] in _DIGITS

    def _follows_term(self, offset: int) -> bool:
        """A '.' right after a term ends the clause (``p(1).5`` is not a float)."""
        j = offset - 1
        return j >= 0 and (self.text[j] in _IDENT_CHARS or self.text[j] in ")]}\"'`")

    def _name(self, start: int) -> Token:
        text, i, n = self.text, start, len(self.text)
        while i < n and text[i] == "/" and i + 1 < n and text[i + 1] in _NAME_CHARS:
            i += 1
            while i < n and text[i] in _NAME_CHARS:
                i += 1
        self.i = i
        raw = text[start:i]
        return Token(NAME, raw, Name(raw), self.position(start))

    def _number(self, start: int) -> Token:
        text, i, n = self.text, start, len(self.text)
        if text[i] == "-":
            i += 1
        while i < n and text[i] in _DIGITS:
            i += 1
        is_float = False
        if i + 1 < n and text[i] == "." and text[i + 1] in _DIGITS:
            is_float = True
            i += 1
            while i < n and text[i] in _DIGITS:
                i += 1
        if i < n and text[i] in "eE":
            j = i + 1
            if j < n and text[j] in "+-":
                j += 1
            if j < n and text[j] in _DIGITS:
                is_float = True
                i = j
                while i < n and text[i] in _DIGITS:
                    i += 1
        raw = text[start:i]
        self.i = i
        pos = self.position(start)
        if i < n and (text[i] in _IDENT_CHARS):
            raise self.error(f"malformed number '{raw}{text[i]}'", start)
        if is_float:
            return Token(FLOAT, raw, Float(float(raw)), pos)
        value = int(raw)
        if not INT64_MIN <= value <= INT64_MAX:
            raise self.error(f"integer literal {raw} does not fit in 64 bits", start)
        return Token(INT, raw, value, pos)

    def _word(self, start: int) -> Token:
        text, i, n = self.text, start, len(self.text)
        if text[i] == ":":
            i += 1
        while i < n:
            if text[i] in _IDENT_CHARS or (
                text[i] in ".:" and i + 1 < n and text[i + 1].isascii() and text[i + 1].isalpha()
            ):
                i += 1
            else:
                break
        raw = text[start:i]
        self.i = i
        pos = self.position(start)
        if raw in KEYWORDS:
            return Token(KEYWORD, raw, raw, pos)
        if raw[0].isupper():
            if "." in raw or ":" in raw:
                raise self.error(f"malformed variable '{raw}'", start)
            return Token(VAR, raw, raw, pos)
        return Token(IDENT, raw, raw, pos)

    def _string(self, start: int, quote: str, is_bytes: bool) -> Token:
        text, n = self.text, len(self.text)
        token_start = start - 1 if is_bytes else start
        i = start + 1
        out: list[str] = []
        while True:
            if i >= n:
                raise self.error("unterminated string", token_start)
            ch = text[i]
            if ch == quote:
                i += 1
                break
            if ch == "\n" and quote != "`":
                raise self.error("unterminated string (a newline needs \\n or a `backtick` string)", token_start)
            if ch == "\\" and quote != "`":
                ch, i = self._escape(i, is_bytes)
                out.append(ch)
                continue
            if is_bytes and ord(ch) > 0x7F:
                raise self.error("bytes literals may only contain ASCII characters; use \\xhh", i)
            out.append(ch)
            i += 1
        self.i = i
        raw = text[token_start:i]
        body = "".join(out)
        pos = self.position(token_start)
        if is_bytes:
            return Token(BYTES, raw, body.encode("latin-1"), pos)
        return Token(STRING, raw, body, pos)

    def _escape(self, i: int, is_bytes: bool) -> tuple[str, int]:
        text, n = self.text, len(self.text)
        if i + 1 >= n:
            raise self.error("unterminated escape sequence", i)
        kind = text[i + 1]
        if kind in _SIMPLE_ESCAPES:
            return _SIMPLE_ESCAPES[kind], i + 2
        if kind == "x":
            digits = text[i + 2 : i + 4]
            if len(digits) != 2 or not all(c in "0123456789abcdefABCDEF" for c in digits):
                raise self.error("\\x needs two hex digits", i)
            return chr(int(digits, 16)), i + 4
        if kind == "u" and not is_bytes:
            if i + 2 >= n or text[i + 2] != "{":
                raise self.error("\\u needs hex digits in braces, like \\u{1F600}", i)
            end = text.find("}", i + 3)
            digits = text[i + 3 : end] if end >= 0 else ""
            if end < 0 or not 1 <= len(digits) <= 6 or not all(c in "0123456789abcdefABCDEF" for c in digits):
                raise self.error("\\u needs 1 to 6 hex digits in braces, like \\u{1F600}", i)
            code = int(digits, 16)
            if code > 0x10FFFF or 0xD800 <= code <= 0xDFFF:
                raise self.error(f"\\u{{{digits}}} is not a Unicode scalar value", i)
            return chr(code), end + 1
        raise self.error(f"unknown escape sequence '\\{kind}'", i)
