"""A judged run's report uses what the judge said: Table-1 outputs carry the primary judge's sem-flip for
judged cells, its gold match is `correct`, and the report shows Cohen's kappa between two judges. The audit,
judge and report apps run in this process (`run_module`); the judges answer from the loopback fake provider."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest

from facet_probe.odi.pipeline import OdiRun, prepare
from facet_probe_dev.testing.fake_providers import FakeProviderServer
from facet_probe_dev.testing.in_process import Ran, run_module

ROOT = Path(__file__).resolve().parents[2]
ENV = {"OPENAI_API_KEY": "sk-test-not-a-real-key", "GOOGLE_API_KEY": "g-test-not-a-real-key"}


def flip_judge(call) -> str:
    """Every set is a flip, and no answer matches the gold (the oracle's exact-match flip is 0, accuracy 1)."""
    n = len(re.findall(r"^ANSWER \d+:", call.texts()[-1], re.M))
    return "Verdict: C\nReason: differ\nGold: " + ", ".join(f"{i}=no" for i in range(1, n + 1))


def alternating_judge(call, _order={}) -> str:  # noqa: B006 (remembers the prompts it saw)
    """A second judge: A for every other distinct prompt (in the order first seen), C for the rest."""
    index = _order.setdefault(call.texts()[-1], len(_order))
    return f"Verdict: {'AC'[index % 2]}\nReason: -"


def run(module: str, *args: str) -> Ran:
    """`python -m <module> <args>` in this process with the fake keys; it must succeed."""
    proc = run_module(module, *args, cwd=ROOT, env=ENV)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


@pytest.mark.slow
def test_judged_cells_reach_table_one_accuracy_and_kappa(tmp_path):
    out = tmp_path / "run"
    with FakeProviderServer(reply=flip_judge) as gpt, FakeProviderServer(reply=alternating_judge) as gem:
        run("facet_probe", f"hydra.run.dir={out}", "progress=false", "model=oracle", "facet=mixed_modality_order",
            "dataset=synthetic_mixed", "limit=4", "judge=gpt_54_mini", f"judge.runner.base_url={gpt.url}/v1",
            "judge.gold_anchored=true")
        summary = pd.read_csv(out / "summary.csv")
        assert summary.flip_rate.tolist() == [0.0]  # exact match: the oracle never flips
        assert summary.sem_flip_set_gpt_54_mini.tolist() == [1.0]
        assert summary.accuracy.tolist() == [0.0]  # the judge's gold match, not exact match (1.0)
        frame, _ = prepare(OdiRun(inputs=[str(out)], out=tmp_path / "odi", variant="paper", outcomes=("correct",)))
        assert len(frame) == 24 and not frame["correct"].astype(bool).any()  # ODI fits the judge's gold match
        anchor = pd.read_csv(out / "gold_anchor.csv")  # judge-free: the oracle's correctness never changes
        assert anchor[["n_items", "sem_flip_set", "gold_anchor_flip", "sem_minus_anchor_pp"]].values.tolist() == \
            [[4, 1.0, 0.0, 100.0]]
        assert "## Gold-anchor cross-check" in (out / "report.md").read_text()
        facet_model = pd.read_csv(out / "facet_model.csv")
        assert facet_model.any_flip.tolist() == [1.0]
        assert facet_model.flip_source.tolist() == ["sem_flip_set_gpt_54_mini"]
        panel = pd.read_csv(out / "panel.csv").set_index("facet")
        assert panel.loc["mixed_modality_order", "any_flip"] == 1.0
        run("facet_probe.judge", f"input={out}", "judge=gemini_pro", f"judge.runner.base_url={gem.url}")
        run("facet_probe.report", f"input={out}", "bootstrap=10")
    facet_model = pd.read_csv(out / "facet_model.csv")  # gemini_pro, the paper's primary judge, now leads
    assert facet_model.flip_source.tolist() == ["sem_flip_set_gemini_pro"]
    flips = pd.read_csv(out / "semantic_flip.csv")
    gem_flip = flips[flips.judge == "gemini_pro"].sem_flip_set.mean()
    assert facet_model.any_flip.tolist() == [gem_flip] and gem_flip == 0.5
    report = (out / "report.md").read_text()
    assert "## Judge agreement" in report and "(B + C) / n" in report
    kappa = pd.read_csv(out / "judge_agreement.csv").iloc[0]
    assert kappa.n == 4 and kappa.kappa == 0.0  # one judge always says C: no agreement beyond chance
