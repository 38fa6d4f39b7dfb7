"""The title of report.md and of the explorer page names the models, the facets and datasets and the settings
(the run folders' names), for an audit's own report, the report app and the explore app."""

from __future__ import annotations

import html
import re
import sys
from pathlib import Path

import pandas as pd
import pytest

from facet_probe import api


def heading(report: Path) -> str:
    return report.read_text().splitlines()[0]


def page_title(page: Path) -> str:
    return html.unescape(re.search(r"<title>(.*?)</title>", page.read_text()).group(1))


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> list[Path]:
    out = tmp_path_factory.mktemp("out")
    return [api.audit(["model=oracle", "limit=2", "progress=false", "bootstrap=10", f"out_root={out}",
                       f"facet={facet}", f"dataset={dataset}"]).run_dir
            for facet, dataset in (("option_order", "synthetic_mcq"), ("few_shot_order", "synthetic_few_shot"))]


@pytest.mark.slow  # 1.5 s or more: left out of `make test-fast`
def test_an_audits_report_and_page_name_model_scope_and_settings(runs):
    run = runs[0]
    expected = f"facet_probe run: oracle on option_order / synthetic_mcq ({run.name})"
    assert heading(run / "report.md") == f"# {expected}"
    assert page_title(run / "explorer.html") == expected


@pytest.mark.slow  # its module fixture audits (1.7-3.6 s): every test using it is left out of `make test-fast`
def test_the_report_app_names_every_model_facet_and_dataset(runs, tmp_path):
    out = api.report({"input": [str(r) for r in runs], "out": str(tmp_path / "both"), "bootstrap": 10}).run_dir
    assert heading(out / "report.md") == (f"# facet_probe report: oracle on few_shot_order, option_order / "
                                          f"synthetic_few_shot, synthetic_mcq ({runs[0].name}, {runs[1].name})")


@pytest.mark.slow  # its module fixture audits (1.7-3.6 s): every test using it is left out of `make test-fast`
def test_the_explore_app_names_them_from_the_run_folders(runs, tmp_path, monkeypatch, capsys):
    from facet_probe.explore.__main__ import cli

    monkeypatch.setattr(sys, "argv", ["facet-probe-explore", f"input=['{runs[0]}','{runs[1]}']",
                                      f"out={tmp_path}"])
    cli()
    assert page_title(tmp_path / "explorer.html") == (
        f"facet_probe explorer: oracle on few_shot_order, option_order / synthetic_few_shot, synthetic_mcq "
        f"({runs[0].name}, {runs[1].name})")


def test_more_than_three_names_are_counted():
    from facet_probe.report.title import title, trials_title

    assert title("report", ["a", "b", "c", "d"], ["f"], ["x", "y"], ["r1", "r2", "r3", "r4"]) == (
        "facet_probe report: 4 models on f / x, y (4 runs)")
    trials = pd.DataFrame({"model": ["m"], "facet": ["f"], "dataset": ["d"]})
    assert trials_title("run", trials, ["s"]) == "facet_probe run: m on f / d (s)"
    assert trials_title("report", pd.DataFrame(), ["s"]) == "facet_probe report: s"
