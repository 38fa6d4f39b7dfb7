"""`fig-think-budget`: experiment=think_budget_gemini through the real google-genai SDK against the loopback fake
provider, whose stand-in model anchors on the first option at a 1k budget and reads content at 8k; the budget
is read from what the runner sent, and the paper's sweep lines up beside ours."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest

from facet_probe.paper import published
from facet_probe.paper.think_budget import budget_of, with_paper
from facet_probe_dev.testing.fake_providers import FakeProviderServer
from facet_probe_dev.testing.fake_providers import sent_thinking_budget as sent_budget
from tests.paper.test_paper_app import app

pytestmark = pytest.mark.slow  # its fixtures alone take seconds (a real run or fit)


def stand_in(call) -> str:
    """1k: the first displayed option (order-anchored); otherwise the option whose text sorts first."""
    options = re.findall(r"^([A-Z])\. (.*)$", call.texts()[-1], re.M)
    if sent_budget(call.body) == 1024:
        return "Answer: A"
    return f"Answer: {min(options, key=lambda o: o[1])[0]}"


@pytest.fixture(scope="module")
def sweep(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("think")
    with FakeProviderServer(reply=stand_in) as server:
        proc = app("facet_probe", "-m", "experiment=think_budget_gemini", "experiment.models=[gemini_3_flash]",
                   "facet=option_order", "dataset=synthetic_mcq", "limit=4",
                   f"++experiment.model_settings.base_url={server.url}",
                   "experiment.model_settings.generation.thinking_config.thinking_budget=1024,8192", "progress=false",
                   f"hydra.sweep.dir={root}", keys={"GOOGLE_API_KEY": "g-test-key-0123456789"})
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert {sent_budget(c.body) for c in server.calls} == {1024, 8192}
    return root


def test_fig_think_budget_draws_flip_against_the_budget_the_runner_sent(sweep, tmp_path):
    proc = app("facet_probe.paper", f"input={sweep}", f"out={tmp_path}", "target=fig-think-budget", "bootstrap=50")
    assert proc.returncode == 0, proc.stderr
    points = pd.read_csv(tmp_path / "fig_think_budget_points.csv").set_index("budget")
    assert points.loc["1k", "budget_tokens"] == 1024 and points.loc["8k", "budget_tokens"] == 8192
    manifest = pd.read_parquet(next(sweep.rglob("manifest.parquet")))  # one manifest: the same seed and items
    # by hand: at 1k the answer is the first displayed option, so an item flips iff its orderings do not all
    # show the same option first; at 8k the answer follows the content, so nothing flips
    firsts = manifest.assign(first=manifest["permutation"].map(lambda p: int(p[0])))
    expected = (firsts.groupby("item_id")["first"].nunique() > 1).mean()
    assert points.loc["1k", "flip"] == pytest.approx(expected) and expected > 0
    assert points.loc["8k", "flip"] == 0.0 and (points["n_items"] == 4).all()
    assert (tmp_path / "fig_think_budget.png").stat().st_size > 0


def test_the_budget_is_read_from_each_family_s_fingerprint():
    assert budget_of({"settings_sent": {"thinking_config": {"thinking_budget": 24576}}}) == ("24k", 24576.0)
    assert budget_of({"settings_sent": {"thinking": {"type": "enabled", "budget_tokens": 2048}}}) == ("2k", 2048.0)
    assert budget_of({"chat_template_options": {"enable_thinking": False}, "thinking": False}) == ("off", 0.0)
    assert budget_of({"generation": {"max_new_tokens": 64}})[0] == "default"


def test_the_papers_sweep_lines_up_with_ours_where_model_cell_and_budget_match():
    ours = pd.DataFrame([{"model": "gemini_3_flash", "facet": "option_order", "dataset": "mmlu_pro", "budget": "8k",
                          "budget_tokens": 8192.0, "flip": 0.15},
                         {"model": "gemini_3_flash", "facet": "option_order", "dataset": "synthetic_mcq",
                          "budget": "8k", "budget_tokens": 8192.0, "flip": 0.2}])
    out = with_paper(ours, published.read("think_budget_sweep.csv"), published.model_names()).set_index("dataset")
    assert out.loc["mmlu_pro", "paper_flip"] == 0.11 and out.loc["mmlu_pro", "paper_regime"] == "easy"
    assert out.loc["mmlu_pro", "paper_difference"] == pytest.approx(0.04)
    assert pd.isna(out.loc["synthetic_mcq", "paper_flip"])
