"""Untrusted text stays text in every Markdown file the apps write, in a real browser (issue 61, point 1).

Hostile item texts and options (an audit of an items file), a model's name and reply (a report over stored
trials), run folders and job errors (a sweep's report and status), attack titles, models and items (the attack
tables and the ImageNet study) are written by the apps in this process; each written `.md` is rendered by
markdown-it-py's CommonMark preset, which keeps raw HTML, and opened in headless Chromium: no planted code runs,
no planted link or image is made, and the planted text is on the page as written. The paper's `.tex` of the
same audit prints it verbatim."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from headless_chromium import browser_context, needs_chromium
from hostile_text import CELL, IMG, JS_LINK, SCRIPT, SVG, WEB_LINK, markdown_it, write_attack_grid

from facet_probe import api
from facet_probe.app.sweep import JobRecord, write_summary
from facet_probe.attack.study import write_study
from facet_probe.attack.tables import write_group_table
from facet_probe.core.untrusted import one_line
from facet_probe.report.sweep_report import cross_model_report

pytestmark = [needs_chromium, pytest.mark.slow]  # an audit, three reports and a browser: a few seconds

DATASET = r"d|<i>\input{/etc/passwd}%$_"
QUESTION = f"{IMG} {JS_LINK}"  # 69 characters: an example line shows 70 of a question
OPTIONS = [f"<svg onload=pwn({i})>" for i in range(4)]  # an example line shows 24 characters of an answer
MODEL = f"{SVG} {CELL}"
REPLY = "[y](https://e.test/) *e*"
FOLDER = "<img src=x onerror=pwn()> [f](mailto:x@evil.example)"  # a run folder's name (no slash)
TITLE = f"t {SCRIPT} {WEB_LINK}"

PAGE = """<!doctype html><html><head><meta charset="utf-8"><title>untouched</title><script>
window.ran = []; function pwn() { window.ran.push("pwn"); document.title = "pwned"; }
window.alert = () => window.ran.push("alert");
</script></head><body>{body}</body></html>"""


def audit(root: Path) -> Path:
    """A position-biased audit of three hostile items: the run folder (its report.md written by the audit)."""
    rows = [{"item_id": f"{DATASET}::q{i}<b>", "dataset": DATASET, "question": QUESTION, "choices": OPTIONS,
             "gold_index": 0} for i in range(3)]
    (root / "items.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    api.audit({"model": "position_biased", "facet": "option_order", "dataset": "items_jsonl",
               "dataset.path": str(root / "items.jsonl"), "out_root": str(root / "runs"), "progress": False,
               "bootstrap": 10})
    (run,) = {p.parent for p in (root / "runs").rglob("run_status.json")}
    return run


def stored_trials_report(root: Path) -> Path:
    """A report over FACET-PROBE v0.0.1 trials of a hostile model name that replied hostile text."""
    fixture = Path(__file__).parents[1] / "fixtures" / "reference_v0_0_1" / "trials.jsonl"
    rows = [json.loads(line) for line in fixture.read_text().splitlines()]
    for r in rows:
        r["model"] = MODEL
        if r["answer_normalized"] == "2":  # the reply of one ordering: a flip
            r["answer_normalized"] = r["raw_output"] = REPLY
    (root / "trials.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    api.report([f"input={root / 'trials.jsonl'}", f"out={root / 'report'}", "bootstrap=10"])
    return root / "report"


def sweep(root: Path, run: Path) -> Path:
    """A sweep root over the audit and a copy of it in a hostile folder, one job with a hostile error."""
    copy = shutil.copytree(run, root / "sweep" / FOLDER)
    jobs = root / "sweep" / ".sweep_jobs"
    jobs.mkdir()
    for num, (folder, error) in enumerate([(run, None), (copy, f"ValueError: {SCRIPT} | {WEB_LINK}")]):
        record = JobRecord(num=num, overrides=[f"+tag={SVG}|{num}"], run_dir=str(folder),
                           state="incomplete" if error else "complete", exit_code=3 if error else 0, error=error)
        (jobs / f"job-{num}.json").write_text(json.dumps(record.__dict__))
    write_summary(root / "sweep")
    assert cross_model_report(root / "sweep", n_boot=10) is not None
    return root / "sweep"


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("hostile")


@pytest.fixture(scope="module")
def written(root) -> dict[Path, list[str]]:
    """Each Markdown file the apps wrote under `root` -> the hostile texts it must show as written."""
    run = audit(root)
    report = stored_trials_report(root)
    swept = sweep(root, run)
    model_dir = root / "attack" / MODEL
    group = write_attack_grid(model_dir / "imagenet4" / "eps16-a1-s200-u10", MODEL, DATASET, TITLE, f"i {IMG}")
    write_group_table(group)
    write_study(model_dir)
    api.paper([f"input={run}", "target=table-k-ablation", f"out={root / 'paper'}", "bootstrap=10"])
    audited = [QUESTION, DATASET, f"{DATASET}::q0<b>", OPTIONS[0]]
    shown = {run / "report.md": audited, swept / FOLDER / "report.md": audited,  # the audit's, and its copy's
             report / "report.md": [MODEL, REPLY[:20]],
             swept / "report.md": [f"position_biased [{FOLDER}]", DATASET],
             swept / "sweep_status.md": [f"+tag={SVG}|1", f"ValueError: {SCRIPT} | {WEB_LINK}", FOLDER],
             model_dir / "imagenet_study.md": [MODEL, TITLE],
             **{group / name: [MODEL, DATASET] for name in ("table.md", "table1.md", "table2.md", "figure7.md")}}
    assert sorted(p for p in root.rglob("*.md")) == sorted(shown)  # every Markdown file written here is checked
    return shown


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    with browser_context(tmp_path_factory.mktemp("profile")) as context:
        yield context


def test_every_written_markdown_file_shows_its_hostile_text_as_text_in_chromium(root, written, browser):
    render = markdown_it()
    page = browser.new_page()
    clean = {"title": "untouched", "ran": [], "foreign links": [], "foreign images": [], "elements with handlers": 0,
             "not shown": []}
    unclean = {}
    for md, planted in written.items():
        html = md.with_name(md.stem + ".rendered.html")  # beside it: its figures load as the report's would
        html.write_text(PAGE.replace("{body}", render.render(md.read_text())))
        page.goto(html.as_uri())
        own = [md.parent.as_uri() + "/" + p for p in ("explorer.html", "figures/")]
        seen = {
            "title": page.title(), "ran": page.evaluate("window.ran"),
            "foreign links": [h for h in page.eval_on_selector_all("a", "as => as.map(a => a.href)")
                              if not h.startswith(tuple(own))],
            "foreign images": [s for s in page.eval_on_selector_all("img", "is => is.map(i => i.src)")
                               if not s.startswith(own[1])],
            "elements with handlers": page.eval_on_selector_all(
                "body *", "es => es.filter(e => [...e.attributes].some(a => a.name.startsWith('on'))).length"),
            "not shown": [p for p in planted if one_line(p) not in " ".join(page.inner_text("body").split())]}
        if seen != clean:
            unclean[str(md.relative_to(root))] = seen
    assert not unclean, "\n".join(f"{md}: {seen}" for md, seen in unclean.items())


def test_the_paper_tex_prints_hostile_names_verbatim(root, written):
    tex = "".join(p.read_text() for p in (root / "paper").glob("*.tex"))
    assert r"d\textbar{}\textless{}i\textgreater{}\textbackslash{}input\{/etc/passwd\}\%\$\_" in tex
    assert r"\input{" not in tex and "<i>" not in tex
