"""The judge's numbers reach every table that reads a judged run (issue 39, points 1, 2, 3 and 16): two API
models (the real SDKs against the loopback fake provider) answer free text on `synthetic_mixed`, a reference
policy answers letters on `synthetic_mcq`; the judge app judges the folder of runs in-process (a second judge
judges one folder), and then the report over the folder of runs, Table 1 and ODI's capability flips are
checked against the per-folder reports, cell by cell."""

from __future__ import annotations

import hashlib
import re

import pandas as pd
import pytest

from facet_probe import api
from facet_probe.metrics.flips import cell_summary
from facet_probe.odi.pipeline import OdiRun, flip_rates, read_inputs
from facet_probe_dev.testing.fake_providers import FakeProviderServer

pytestmark = pytest.mark.slow  # its fixtures alone take seconds (a real run or fit)

BOOT = 200
MIXED = ["facet=mixed_modality_order", "dataset=synthetic_mixed", "limit=4"]
API_MODELS = {"gpt_54_mini": "/v1", "gemini_3_flash": ""}  # model config -> base_url suffix on the fake server
FACET_MODEL = ["any_flip", "any_flip_lo", "any_flip_hi", "accuracy", "flip_source"]


def digest(*parts: str) -> int:
    return int(hashlib.sha256("\x1f".join(parts).encode()).hexdigest(), 16)


def reply(call) -> str:
    """Judges: gemini_pro calls every set equivalent; the gpt judge says A or C by the prompt's hash and a gold match
    per answer. Models: one of three colours by the model and its prompt, so answers differ by ordering."""
    text = call.texts()[-1]
    if "Decide ONE label" in text:
        if call.model.startswith("gemini"):
            return "Verdict: A\nReason: the same"
        n, h = len(re.findall(r"^ANSWER \d+:", text, re.M)), digest(text)
        gold = ", ".join(f"{i}={'yes' if (h >> i) % 2 else 'no'}" for i in range(1, n + 1))
        return f"Verdict: {'AC'[h % 2]}\nReason: -\nGold: {gold}"
    return f"Answer: {['red', 'blue', 'green'][digest(call.model, *call.texts()) % 3]}"


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """A folder of three run folders, judged (gpt_54_mini on all, gemini_pro on gpt_54_mini's), each reported
    on its own after the judges; the audits' own reports kept as they were written."""
    root = tmp_path_factory.mktemp("judged") / "runs"
    with pytest.MonkeyPatch.context() as mp, FakeProviderServer(reply=reply) as server:
        mp.setenv("OPENAI_API_KEY", "sk-test-not-a-real-key")
        mp.setenv("GOOGLE_API_KEY", "g-test-not-a-real-key")
        audited = {name: api.audit([f"hydra.run.dir={root / name}", "progress=false", f"model={name}",
                                    f"model.base_url={server.url}{suffix}", f"bootstrap={BOOT}", *MIXED])
                   for name, suffix in API_MODELS.items()}
        audited["position_biased"] = api.audit([  # an exact-match cell whose items differ (no Wilson fallback)
            f"hydra.run.dir={root / 'position_biased'}", "progress=false", "model=position_biased", "model.p=0.1",
            "facet=option_order", "dataset=synthetic_mcq", "limit=60", f"bootstrap={BOOT}"])
        api.judge([f"input={root}", "judge=gpt_54_mini", f"judge.runner.base_url={server.url}/v1",
                   "judge.gold_anchored=true"])
        api.judge([f"input={root / 'gpt_54_mini'}", "judge=gemini_pro", f"judge.runner.base_url={server.url}"])
    own = {name: api.report([f"input={root / name}", f"bootstrap={BOOT}"]) for name in audited}
    return root, audited, own


def test_a_report_over_several_run_folders_keeps_each_folders_judge(runs, tmp_path):
    """Point 1: the combined report reads every input folder's judges, and each judged cell says what its own
    folder's report says (the cell's primary judge: gemini_pro where it judged, gpt_54_mini elsewhere)."""
    root, _, own = runs
    combined = api.report([f"input={root}", f"out={tmp_path / 'combined'}", f"bootstrap={BOOT}"])
    facet_model = combined["facet_model"].set_index(["model", "facet"])
    for name, result in own.items():
        mine = result["facet_model"].set_index(["model", "facet"])
        pd.testing.assert_frame_equal(facet_model.loc[mine.index, FACET_MODEL], mine[FACET_MODEL])
        main = combined["model_main"].set_index("model").loc[name]
        assert main[["any_flip", "accuracy"]].tolist() == result["model_main"].iloc[0][["any_flip", "accuracy"]].tolist()
    sources = facet_model["flip_source"].to_dict()
    assert sources == {("gemini_3_flash", "mixed_modality_order"): "sem_flip_set_gpt_54_mini",
                       ("gpt_54_mini", "mixed_modality_order"): "sem_flip_set_gemini_pro",
                       ("position_biased", "option_order"): "exact_match"}
    assert facet_model.loc[("gpt_54_mini", "mixed_modality_order"), "any_flip"] == 0.0  # gemini_pro: every set A
    panel = combined["panel"].set_index("facet")
    assert panel.loc["mixed_modality_order", "any_flip"] == pytest.approx(
        facet_model.xs("mixed_modality_order", level="facet")["any_flip"].mean())
    anchor = combined["gold_anchor"].set_index(["model", "judge"])  # the judge-free cross-check, both folders
    for name in API_MODELS:
        pd.testing.assert_frame_equal(anchor.loc[[name]], own[name]["gold_anchor"].set_index(["model", "judge"]))
    assert {"sem_flip_set_gpt_54_mini", "sem_flip_set_gemini_pro"} <= set(combined["summary"].columns)
    report = (combined.run_dir / "report.md").read_text()
    assert "## Judge agreement" in report and "## Gold-anchor cross-check" in report


def provenance_rows(report_md: str) -> dict[str, tuple[str, str]]:
    """Model -> (tokens, API cost) from the provenance table of a report.md."""
    rows = [ln.split("|")[1:-1] for ln in report_md.splitlines() if ln.startswith("| ") and "---" not in ln]
    header = [c.strip() for c in rows[0]]
    at = {name: header.index(name) for name in ("model", "tokens (in / out)", "API cost (USD)")}
    return {r[at["model"]].strip(): (r[at["tokens (in / out)"]].strip(), r[at["API cost (USD)"]].strip())
            for r in rows[1:] if len(r) == len(header)}


def test_a_report_over_several_folders_gives_each_run_its_own_tokens_and_cost(runs, tmp_path):
    """The combined report's provenance table counts each run's tokens and API cost as that run's own report
    does (it showed 0 / 0 and '-' for every run as soon as it had more than one input)."""
    root, _, own = runs
    combined = api.report([f"input={root}", f"out={tmp_path / 'combined'}", f"bootstrap={BOOT}"])
    together = provenance_rows((combined.run_dir / "report.md").read_text())
    for name in API_MODELS:
        alone = provenance_rows((own[name].run_dir / "report.md").read_text())[name]
        assert together[name] == alone and alone[0] != "0 / 0" and alone[1] != "-"


def test_table_one_is_built_from_judged_runs_with_the_judges_sem_flip(runs, tmp_path):
    """Point 2: Table 1 over the judged folder of runs, and over one judged folder, carries the report's
    judged flips (no KeyError from two `flip_source` columns)."""
    root, _, own = runs
    for name, inputs in (("all", root), ("one", root / "gemini_3_flash")):
        table = api.paper([f"input={inputs}", "target=table1", f"out={tmp_path / name}", f"bootstrap={BOOT}"])
        cells = table["table1"].set_index(["model", "facet"])
        for model in API_MODELS if name == "all" else ["gemini_3_flash"]:
            row = own[model]["facet_model"].iloc[0]
            assert cells.loc[(model, "mixed_modality_order"), "flip"] == row["any_flip"]
            assert cells.loc[(model, "mixed_modality_order"), "flip_source"] == row["flip_source"]
            assert cells.loc[(model, "mean5"), "flip_source"].startswith("sem_flip_set_")


def test_a_cells_interval_is_one_number_in_the_audit_the_report_and_table_one(runs, tmp_path):
    """Point 16: the audit's report, the report app's report.md / facet_model.csv and the paper's table1 print
    the same interval for the same cell (one rule, one seed), exact-match or judged."""
    root, audited, own = runs
    for name, inputs, results in (("exact", root / "position_biased", [audited["position_biased"]]),
                                  ("all", root, [audited["position_biased"], *own.values()])):
        table = api.paper([f"input={inputs}", "target=table1", f"out={tmp_path / name}", f"bootstrap={BOOT}"])
        cells = table["table1"].set_index(["model", "facet"])
        for result in results:
            row = result["facet_model"].iloc[0]
            key = (row["model"], row["facet"])
            assert (cells.loc[key, "flip_lo"], cells.loc[key, "flip_hi"]) == (row["any_flip_lo"], row["any_flip_hi"])
            text = f"{cells.loc[key, 'flip']:.3f} [{cells.loc[key, 'flip_lo']:.3f}, {cells.loc[key, 'flip_hi']:.3f}]"
            assert text in (result.run_dir / "report.md").read_text(), key
    exact = cells.loc[("position_biased", "option_order")]
    assert exact["flip_lo"] < exact["flip"] < exact["flip_hi"]  # a real bootstrap (no Wilson fallback) ...
    other_seed = cell_summary(own["position_biased"]["item_metrics"], n_boot=BOOT, seed=42).iloc[0]
    assert (other_seed["any_flip_lo"], other_seed["any_flip_hi"]) != (exact["flip_lo"], exact["flip_hi"])  # seeded


def test_capability_reads_the_flip_table_one_prints_and_says_its_source(runs, tmp_path):
    """Point 3: ODI's per-model flip is the reports' and Table 1's mean5 (the judges' sem-flip where judged),
    with its source and Table 1's interval."""
    root, _, own = runs
    run = OdiRun(inputs=[str(root)])
    frame, judged = read_inputs(run)
    flips = flip_rates(run, frame, judged).set_index("model")
    for name, result in own.items():  # one facet per model here: its mean5 is its facet's flip
        row = result["facet_model"].iloc[0]
        assert flips.loc[name, "flip_rate"] == row["any_flip"], name
        assert flips.loc[name, "flip_source"] == row["flip_source"], name
    table = api.paper([f"input={root}", "target=table1", f"out={tmp_path / 'paper'}", "bootstrap=1000"])
    mean5 = table["table1"].query("facet == 'mean5' and model != 'panel mean'").set_index("model")
    assert flips["flip_rate"].to_dict() == mean5["flip"].to_dict()
    assert flips["flip_source"].to_dict() == mean5["flip_source"].to_dict() == {
        "gemini_3_flash": "sem_flip_set_gpt_54_mini", "gpt_54_mini": "sem_flip_set_gemini_pro",
        "position_biased": "exact_match"}
    assert (flips[["flip_rate_lo", "flip_rate_hi"]].to_numpy() == mean5[["flip_lo", "flip_hi"]].to_numpy()).all()
