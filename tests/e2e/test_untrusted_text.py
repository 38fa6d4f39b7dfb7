"""Untrusted text stays text (issue 61, point 1): the escaping of `core.untrusted` on any text, and each writer of
Markdown and LaTeX on hostile item texts, options, replies and names (no browser: markdown-it-py's tokens; the
browser check of the apps' written files is tests/e2e/test_untrusted_pages.py)."""

from __future__ import annotations

import json
from collections import namedtuple
from types import SimpleNamespace

import pandas as pd
from hostile_text import (
    CELL,
    IMG,
    JS_LINK,
    LATEX,
    MARKUP,
    SCRIPT,
    SVG,
    WEB_LINK,
    markdown_it,
    problems,
    write_attack_grid,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from facet_probe.app.sweep import JobRecord, write_summary
from facet_probe.attack.study import write_study
from facet_probe.attack.tables import write_group_table
from facet_probe.core.items import Item
from facet_probe.core.untrusted import latex_text, markdown_cell, markdown_link_text, markdown_text, one_line
from facet_probe.paper.render import write_table
from facet_probe.report.completeness import Completeness
from facet_probe.report.examples import example_line, render_examples
from facet_probe.report.markdown import ReportPage, md_table, render_report
from facet_probe.report.provenance import render_provenance

#: pieces of Markdown, HTML and LaTeX syntax, text is drawn from
PIECES = [*"ab1 _*`~$<>&#;[]()!:|\\-+=.\n\té\x00{}%^\"'", "&amp;", "&#60;", "](", "![", "<img src=x>", "</p>",
          "https://x.y", "1. ", "1) ", "    ", "[^1]", "[x]: ", "<!--", "```", "\\input{x}"]
texts = st.lists(st.sampled_from(PIECES), max_size=25).map("".join)


def inline_tokens(markdown: str) -> list:
    return [t for t in markdown_it().parse(markdown) if t.type == "inline"]


@settings(max_examples=200, deadline=None)
@given(texts)
def test_markdown_text_reads_as_written_even_at_the_start_of_a_line(text):
    tokens = markdown_it().parse(markdown_text(text))
    if not one_line(text):
        assert tokens == []
        return
    assert [t.type for t in tokens] == ["paragraph_open", "inline", "paragraph_close"]
    assert {c.type for c in tokens[1].children} <= {"text", "text_special"}
    assert "".join(c.content for c in tokens[1].children) == one_line(text)


@settings(max_examples=150, deadline=None)
@given(texts, texts)
def test_markdown_cells_read_as_written_and_keep_the_table_s_shape(a, b):
    cells = inline_tokens(f"| h | g |\n|---|---|\n| {markdown_cell(a)} | {markdown_cell(b)} |\n")[2:]
    assert len(cells) == 2
    for cell, text in zip(cells, (a, b), strict=True):
        assert {c.type for c in cell.children} <= {"text", "text_special"}
        assert "".join(c.content for c in cell.children) == one_line(text)


@settings(max_examples=150, deadline=None)
@given(texts)
def test_a_link_s_text_reads_as_written_and_the_link_is_ours(text):
    tokens = inline_tokens(f"[{markdown_link_text(text)}](explorer.html#x)")[0].children
    assert (tokens[0].type, tokens[0].attrs["href"], tokens[-1].type) == ("link_open", "explorer.html#x", "link_close")
    assert {t.type for t in tokens[1:-1]} <= {"text", "text_special"}
    assert "".join(t.content for t in tokens[1:-1]) == one_line(text)


@settings(max_examples=200, deadline=None)
@given(texts)
def test_latex_text_has_no_command_comment_math_or_blank_line_of_its_own(text):
    tex = latex_text(text)
    plain = tex
    for command in (r"\textbackslash{}", r"\textasciitilde{}", r"\textasciicircum{}", r"\textless{}",
                    r"\textgreater{}", r"\textbar{}"):
        plain = plain.replace(command, "")
    for special in "&%$#_{}":
        plain = plain.replace("\\" + special, "")
    assert not set(plain) & set("\\&%$#_{}~^<>|\n")


def test_escaped_text_stays_readable_raw():
    assert markdown_text("qwen2_5_vl: 0.41 [0.35, 0.47] R&D, C:\\data") == "qwen2_5_vl: 0.41 [0.35, 0.47] R&D, C:\\data"
    assert markdown_text(IMG) == "&lt;img src=x onerror=\"document.title='pwned'\"&gt;"
    assert markdown_text(WEB_LINK) == r"\[click\](https://evil.example/)"  # a bracket opens a line escaped
    assert markdown_text(f"see {WEB_LINK}") == r"see [click\](https://evil.example/)"
    assert markdown_text("# 1. - x") == r"\# 1. - x" and markdown_text("1. x") == r"1\. x"
    assert markdown_cell(CELL) == r"a\|b c"
    assert latex_text(LATEX) == r"\textbackslash{}input\{/etc/passwd\} 5\% \$x\$ a\_b"


# ---------------------------------------------------------------- each writer, on hostile text

SHORT_LINK = "[y](https://e.test/)"  # an example line shows 24 characters of an answer
Row = namedtuple("Row", "facet item_id ordering_idx answer_normalized correct")


def test_report_md_shows_hostile_titles_cells_notes_provenance_and_examples_as_text(tmp_path):
    model, dataset = f"m {SVG} {CELL}", f"d {WEB_LINK}"
    cell = {"model": model, "facet": "option_order", "dataset": dataset}
    summary = pd.DataFrame([{**cell, "n_items": 1, "flip_rate": 1.0, "flip_rate_lo": 0.5, "flip_rate_hi": 1.0}])
    paper = SimpleNamespace(facet_model=pd.DataFrame([{"model": model, "facet": "option_order", "n_datasets": 1,
                                                       "any_flip": 1.0, "accuracy": 0.5}]))
    gaps = Completeness(pd.DataFrame([{**cell, "n_trials_missing": 1, "n_trials_expected": 2, "n_items_short": 1}]),
                        pd.DataFrame({"item_id": [f"x::{SCRIPT}"]}))
    item = Item(item_id=f"x::{SVG}", dataset="x", question=f"{IMG} {JS_LINK}", choices=[SVG, MARKUP[:20]],
                gold_index=0)
    line = example_line([Row("option_order", item.item_id, 0, "A", True), Row("option_order", item.item_id, 1, "B", 0),
                         Row("option_order", item.item_id, 2, SHORT_LINK, 0)], item, model)
    run = dict.fromkeys(("date", "seed", "repeats", "prompt_mode", "limit", "facet_probe", "git_commit"))
    provenance = render_provenance([{**run, "run": f"runs/{IMG}", "folder": str(tmp_path), "k": 2,
                                     "skipped_rows": {dataset: {f"a {SCRIPT}": 1}}, "models": {
        model: {"model_id": SCRIPT, "settings_sent": {"system": CELL}, "sampling": "greedy"}}}])
    page = ReportPage(f"facet_probe run: {model}", summary, paper, notes=gaps.notes(None, 0), provenance=provenance,
                      examples=render_examples({(model, "option_order", dataset): [line]}))
    text = render_report(page, tmp_path)
    assert problems(text, [model, dataset, item.question, item.item_id, SVG, MARKUP[:20], SHORT_LINK, SCRIPT,
                           f"runs/{IMG}", f"system={CELL}", f"x::{SCRIPT}"]) == []
    assert "<parse_error>" not in md_table(pd.DataFrame({"a": ["<parse_error>"]}))


def test_sweep_status_md_shows_hostile_overrides_and_errors_as_text(tmp_path):
    jobs = tmp_path / ".sweep_jobs"
    jobs.mkdir()
    record = JobRecord(num=0, overrides=[f"model.name={SVG}|x"], run_dir=str(tmp_path / IMG), state="user error",
                       exit_code=2, error=f"ValueError: {SCRIPT} {WEB_LINK} | y")
    (jobs / "job-0.json").write_text(json.dumps(record.__dict__))
    write_summary(tmp_path)
    assert problems((tmp_path / "sweep_status.md").read_text(), [f"model.name={SVG}|x", str(tmp_path / IMG),
                                                                  f"ValueError: {SCRIPT} {WEB_LINK} | y"]) == []


def test_attack_tables_and_the_study_show_hostile_models_datasets_titles_and_items_as_text(tmp_path):
    model, dataset, title, item = f"m {SVG} {CELL}", f"d {WEB_LINK}", f"t {SCRIPT} {JS_LINK}", f"i {IMG}"
    group = write_attack_grid(tmp_path / "attack" / model / "imagenet4" / "eps16-a1-s200-u10", model, dataset, title,
                              item)
    write_group_table(group)
    written = {name: (group / name).read_text() for name in ("table.md", "table1.md", "table2.md", "figure7.md")}
    assert {name: problems(text, [model, dataset]) for name, text in written.items()} == dict.fromkeys(written, [])
    assert problems(written["table.md"] + written["table1.md"], [title, item]) == []
    write_study(tmp_path / "attack" / model)
    assert problems((tmp_path / "attack" / model / "imagenet_study.md").read_text(), [model, title]) == []


def test_paper_tex_prints_hostile_cells_labels_and_captions_verbatim(tmp_path):
    frame = pd.DataFrame({"model": [f"m {LATEX} {CELL} <b>"], f"{LATEX} col": [0.5]})
    (_, tex_path) = write_table(frame, tmp_path, "t", f"caption {LATEX}\n\nafter a blank line")
    tex = tex_path.read_text()
    body = tex.split(r"\begin{tabular}", 1)[1]
    assert r"\input" not in tex and "<b>" not in tex and "a|b" not in tex
    assert body.count(r"\textbackslash{}input\{/etc/passwd\} 5\% \$x\$ a\_b") == 2  # the cell and its column's label
    assert r"a\textbar{}b c \textless{}b\textgreater{}" in body  # on one line, printed as written
    assert r"caption \textbackslash{}input\{/etc/passwd\} 5\% \$x\$ a\_b after a blank line" in tex
