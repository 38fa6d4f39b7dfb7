"""Untrusted text (item texts, options, model replies, rationales, names from user files) as Markdown and LaTeX
that print it as written: never raw HTML, a link, an image, markup or a LaTeX command; one line, still readable raw.

Markdown: `<`, `>` and an `&` that would start a character reference become entities (every renderer, raw HTML
kept or not, shows them as the characters); the characters that start inline markup (code spans, emphasis,
strikethrough, math) get a backslash; a `]` before `(`, `[` or `:` too (no link, image or reference definition
can form; a bracketed `[0.35, 0.47]` stays as it is), and so does a construct that would start a block were the
text to open a line (`#`, `+`, `-`, `=`, `[`, `|`, `1.`). Line breaks become spaces. A bare `https://...` is left
as it is (GFM may show it as a link to that address, never to a script)."""

from __future__ import annotations

import re

#: A backslash before ASCII punctuation or at the end (it would escape it, or break the line), the characters that
#: open inline markup, `_` unless inside a word (`snake_case` is no emphasis), a `]` that would close a link's text.
_INLINE = re.compile(r"\\(?=[!-/:-@\[-`{-~]|$)|[`*~$]|(?<![^\W_])_|_(?![^\W_])|\](?=[(\[:])")
#: The same inside a link's text, where any bracket counts.
_IN_LINK = re.compile(_INLINE.pattern + r"|[\[\]]")
#: `<`, `>` and an `&` that starts a character reference (`&amp;`, `&#60;`): entities, not backslashes, because
#: Python-Markdown and the original Markdown.pl read `\<` as a backslash before raw HTML.
_ENTITY = re.compile(r"<|>|&(?=#?[0-9A-Za-z]+;)")
_ENTITIES = {"<": "&lt;", ">": "&gt;", "&": "&amp;"}
#: What opens a block at the start of a line: a heading, list item, setext underline, table row, a task box or
#: reference definition, an ordered list item.
_LINE_START = re.compile(r"^(?:[#+\-=|\[]|\d{1,9}(?=[.)](?:\s|$)))")
#: Control characters (a NUL, an escape sequence) and line breaks: one space each, as every other run of space.
_BREAKS = re.compile(r"[\x00-\x1f\x7f\s]+")


def one_line(text: object) -> str:
    """The text on one line: each run of whitespace or control characters one space, none at either end."""
    return _BREAKS.sub(" ", str(text)).strip()


def _inline(text: object, markup: re.Pattern = _INLINE) -> str:
    escaped = markup.sub(lambda m: "\\" + m.group(), one_line(text))
    return _ENTITY.sub(lambda m: _ENTITIES[m.group()], escaped)


def markdown_text(text: object) -> str:
    """Text as Markdown that shows it as written, wherever it stands in a line (the start included)."""
    text = _inline(text)
    return _LINE_START.sub(lambda m: m.group() + "\\" if m.group()[0].isdigit() else "\\" + m.group(), text, count=1)


def markdown_link_text(text: object) -> str:
    """Text as the text of a link we make, `[<here>](...)`: every bracket escaped, so none ends the text early."""
    return _inline(text, _IN_LINK)


def markdown_cell(value: object) -> str:
    """A table cell's text as Markdown that shows it as written (a `|` does not end the cell)."""
    return _inline(value).replace("|", "\\|")


#: Characters special to LaTeX text mode and what prints them (`%` would end the line at a comment; `<`, `>` and
#: `|` print as other glyphs in the default font encoding).
_LATEX = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_", "{": r"\{",
          "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}", "<": r"\textless{}",
          ">": r"\textgreater{}", "|": r"\textbar{}"}
_LATEX_SPECIAL = re.compile("|".join(re.escape(c) for c in _LATEX))


def latex_text(text: object) -> str:
    """Text as LaTeX text mode that prints it verbatim, on one line (a blank line would end a cell or caption)."""
    return _LATEX_SPECIAL.sub(lambda m: _LATEX[m.group()], one_line(text))
