"""Hostile text planted in what the apps write (item texts, options, model replies, names), and the check that a
written Markdown file shows it as text: parsed by markdown-it-py's CommonMark preset, which keeps raw HTML (tables
on), it holds no HTML, no link or image of its own, and each planted string reads as written."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

import pytest

from facet_probe.core.untrusted import one_line

#: each sets the page's title where it runs; `pwn()` is defined by the page the browser test renders
IMG = "<img src=x onerror=\"document.title='pwned'\">"
SCRIPT = "<script>document.title='pwned'</script>"
SVG = "<svg onload=pwn()>"
JS_LINK = "[x](javascript:alert(1))"
WEB_LINK = "[click](https://evil.example/)"
MARKUP = "`code` *em* ~~gone~~ $x$"
CELL = "a|b\nc"  # a pipe and a line break inside a table cell
LATEX = r"\input{/etc/passwd} 5% $x$ a_b"

#: where our own links and images point (the explorer page, the report's figures)
OWN_TARGETS = ("explorer.html", "figures/")


@cache
def markdown_it():
    return pytest.importorskip("markdown_it", reason="markdown-it-py (the dev extra) is not installed").MarkdownIt(
        "commonmark").enable(["table", "strikethrough"])


def _walk(tokens):
    for token in tokens:
        yield token
        yield from _walk(token.children or ())


def problems(markdown: str, planted: list[str]) -> list[str]:
    """What makes `markdown` unsafe or untrue to its planted text: raw HTML, a link or image not of ours, a planted
    string not in the rendered text as written (one line: line breaks become spaces)."""
    tokens = list(_walk(markdown_it().parse(markdown)))
    found = [f"{t.type}: {t.content!r}" for t in tokens if t.type in ("html_inline", "html_block")]
    found += [f"{t.type} -> {t.attrs.get('href') or t.attrs.get('src')}" for t in tokens
              if t.type in ("link_open", "image")
              and not str(t.attrs.get("href") or t.attrs.get("src")).startswith(OWN_TARGETS)]
    text = "".join(t.content for t in tokens if t.type in ("text", "text_special", "code_inline"))
    found += [f"not shown as written: {p!r}" for p in planted if one_line(p) not in text]
    return found


def attack_row(item: str, attacked: bool = False, success: bool = False) -> dict:
    """One results.jsonl row of an attack run (the fields the tables read)."""
    row = {"sample_id": item, "item_id": item, "selected": True, "selection_reason": "correct", "clean_correct": True,
           "clean_answer": "A", "attacked": attacked, "success": success, "labels": ["A", "B"],
           "options": [SVG, IMG], "question": IMG, "clean_rationale": "It is round.", "clean_answer_first": False}
    if attacked:
        row |= {"adv_correct": not success, "adv_answer": "B" if success else "A", "adv_rationale": "It is square.",
                "rationale_changed": True, "adv_answer_first": False, "linf_255": 16.0, "steps_run": 10,
                "stopped_early": False}
    return row


def write_attack_grid(group: Path, model: str, dataset: str, title: str, item: str) -> Path:
    """A budget folder of two attack runs (with and without CoT) whose model, dataset, attack title and one item id
    (held by one run only) are the given texts."""
    for mode, rows in (("cot", [attack_row("i1", True, True), attack_row(item)]),
                       ("direct", [attack_row("i1", True, True)])):
        run = group / f"answer-{mode}"
        run.mkdir(parents=True)
        (run / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        meta = {"model": model, "dataset": dataset, "attack": "answer", "mode": mode, "attack_title": title,
                "eps_255": "16", "alpha_255": "1", "steps": 200, "update_every": 10}
        (run / "summary.json").write_text(json.dumps({**meta, "n": len(rows), "clean_accuracy": 1.0,
                                                      "adv_accuracy": 0.5, "attacked": 1, "successes": 1,
                                                      "success_rate": 1.0, "rationale_changed_share": 1.0,
                                                      "skip_rationale_share": 0.0, "clean_skip_rationale_share": 0.0}))
        (run / "attack_settings.json").write_text(json.dumps(meta))
    return group
