"""Python source as escaped HTML with ``<span>`` classes for keywords, strings, comments, numbers, built-ins and
the ``robo`` object, for the episode viewer (:mod:`pyrua_ros.reports.viewer`).

Written here on the standard library's ``tokenize`` (no highlighter package): every character of the source comes
out once, in order, HTML-escaped, so model-written code cannot inject markup. Code that does not tokenize (a cell
cut off mid-string) is shown escaped and unhighlighted from the first token that fails.
"""

from __future__ import annotations

import builtins
import html
import io
import keyword
import token
import tokenize

CLASSES = {"keyword": "k", "string": "s", "comment": "c", "number": "n", "builtin": "b", "robo": "r", "def": "f"}
BUILTINS = frozenset(name for name in dir(builtins) if not name.startswith("_"))
CSS = ("pre.code .k { color: #7a2f9a; font-weight: 600; } pre.code .s { color: #1a7a37; } "
       "pre.code .c { color: #6b7280; font-style: italic; } pre.code .n { color: #a04d00; } "
       "pre.code .b { color: #1f5fbf; } pre.code .r { color: #b3261e; font-weight: 600; } "
       "pre.code .f { color: #0b6e8a; font-weight: 600; }")


def _kind(tok: tokenize.TokenInfo, previous: str) -> str | None:
    if tok.type == token.COMMENT:
        return "comment"
    if tok.type == token.STRING or tok.type in _FSTRING_TYPES:
        return "string"
    if tok.type == token.NUMBER:
        return "number"
    if tok.type == token.NAME:
        if keyword.iskeyword(tok.string) or keyword.issoftkeyword(tok.string):
            return "keyword"
        if previous in ("def", "class"):
            return "def"
        if tok.string == "robo":
            return "robo"
        if tok.string in BUILTINS and previous != ".":
            return "builtin"
    return None


_FSTRING_TYPES = {getattr(token, name) for name in ("FSTRING_START", "FSTRING_MIDDLE", "FSTRING_END")
                  if hasattr(token, name)}


def _offsets(source: str) -> list[int]:
    """Character offset of the start of every line (1-based line numbers index it)."""
    starts, total = [0, 0], 0
    for line in source.splitlines(keepends=True):
        total += len(line)
        starts.append(total)
    return starts


def highlight_python(source: str) -> str:
    """``source`` as HTML (no enclosing ``<pre>``): escaped text with ``<span class=...>`` around tokens."""
    starts = _offsets(source)
    out: list[str] = []
    pos, previous = 0, ""
    try:
        for tok in tokenize.generate_tokens(io.StringIO(source).readline):
            if tok.type in (token.ENDMARKER, token.DEDENT, token.INDENT, token.NEWLINE, token.NL):
                continue
            begin = starts[tok.start[0]] + tok.start[1] if tok.start[0] < len(starts) else len(source)
            end = starts[tok.end[0]] + tok.end[1] if tok.end[0] < len(starts) else len(source)
            if begin < pos or end > len(source):
                continue
            out.append(html.escape(source[pos:begin]))
            kind = _kind(tok, previous)
            text = html.escape(source[begin:end])
            out.append(f'<span class="{CLASSES[kind]}">{text}</span>' if kind else text)
            pos = end
            if tok.type not in (token.COMMENT,):
                previous = tok.string
    except (tokenize.TokenError, IndentationError, SyntaxError):
        pass
    out.append(html.escape(source[pos:]))
    return "".join(out)


__all__ = ["CSS", "highlight_python"]
