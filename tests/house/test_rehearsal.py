"""The dress rehearsal at CI scale (`make rehearsal` runs it full size): every app of both papers, joined through
the files each hands to the next, with no step failing, no traceback, no key written; and each join check
catches the break it names."""

from __future__ import annotations

import pickle
import shutil
from pathlib import Path

import pandas as pd
import pytest

from facet_probe_dev.rehearsal import joins
from facet_probe_dev.rehearsal.run import SCALES, Rehearsal, commands, rehearse
from facet_probe_dev.testing.tiny_models import built_once

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def rehearsal(run_shared: Path, tiny_root: Path) -> Rehearsal:
    """One rehearsal per test run, whichever xdist worker asks first: the other waits for it (work stealing can put
    this module's tests on both workers). Built in place (its files record their paths); `outcomes.pkl`, written
    last, marks it whole (a killed build is replaced by the next, `rehearse` refreshing the folder)."""
    def build(folder: Path) -> None:
        made = rehearse(SCALES["ci"], folder / "out", echo=False, models=tiny_root)  # blip2 shared with its tests
        (folder / "outcomes.pkl").write_bytes(pickle.dumps(made))

    folder = built_once(run_shared / "rehearsal", build, done="outcomes.pkl", in_place=True)
    return pickle.loads((folder / "outcomes.pkl").read_bytes())


def test_every_step_runs_and_every_join_holds(rehearsal):
    assert joins.check(rehearsal) == []
    assert len(rehearsal.outcomes) == len(commands(SCALES["ci"], rehearsal.out, "http://x", Path("m")))


def _copy(rehearsal: Rehearsal, tmp_path: Path) -> Rehearsal:
    copy = tmp_path / "copy"
    shutil.copytree(rehearsal.out, copy, ignore=shutil.ignore_patterns("models", "*.safetensors", "*.png", "*.pt"))
    return Rehearsal(copy, rehearsal.scale, list(rehearsal.outcomes))


def test_the_checks_catch_a_table1_that_lost_the_judge(rehearsal, tmp_path):
    broken = _copy(rehearsal, tmp_path)
    path = broken.out / "paper" / "table1.csv"
    table = pd.read_csv(path)
    mixed = table["facet"] == "mixed_modality_order"
    table.loc[mixed, "flip_source"] = "exact_match"
    table.loc[mixed, "flip"] = table.loc[mixed, "flip"] + 0.5
    table.to_csv(path, index=False)
    assert joins.table1_shows_the_judges_sem_flip(broken)
    assert joins.combined_report_keeps_the_judge(broken)


def test_the_checks_catch_a_written_key_and_a_logged_traceback(rehearsal, tmp_path):
    broken = _copy(rehearsal, tmp_path)
    (broken.out / "runs" / "leak.log").write_text("Traceback (most recent call last):\n  key=" +
                                                  next(iter(joins.KEYS.values())))
    assert any("leak.log" in p for p in joins.no_secret_written(broken))
    assert any("leak.log" in p for p in joins.no_traceback_anywhere(broken))


def test_the_checks_catch_capability_off_table1(rehearsal, tmp_path):
    broken = _copy(rehearsal, tmp_path)
    path = broken.out / "odi" / "model_flip_rates.csv"
    rates = pd.read_csv(path)
    rates.loc[0, "flip_rate"] += 0.1
    rates.to_csv(path, index=False)
    assert joins.capability_uses_table1s_mean5(broken)


def test_a_paper_target_counts_as_built_whether_its_files_are_named_by_a_relative_or_an_absolute_path(tmp_path):
    """`make rehearsal` writes under a relative `outputs/rehearsal`, so the paper app names its files relatively:
    the join read only absolute paths and called every target unbuilt."""
    from facet_probe.paper.targets import TARGETS
    from facet_probe_dev.rehearsal.run import Command, Outcome

    said = "\n".join(f"{name}: outputs/rehearsal/paper/{name}.csv" for name in TARGETS if name not in ("table1", "fig-pareto"))
    said += f"\ntable1: {tmp_path}/table1.csv\nfig-pareto: skipped (no input)"
    paper = Command("paper", ("facet-probe-paper", "out=outputs/rehearsal/paper"))
    r = Rehearsal(tmp_path, SCALES["ci"], [Outcome(paper, 0, 0.1, said)])
    assert joins.every_paper_target_built(r) == [
        f"paper target fig-pareto was not built (paper logs: {tmp_path / 'logs'})"]
