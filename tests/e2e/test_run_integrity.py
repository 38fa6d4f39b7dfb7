"""Run integrity: a run folder holds one set of settings and one manifest, every configured model gets its
trials, reports read exactly the run's trials and say what is missing, a shard says it is one, and stores
written by older code are resumed without a single new call."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from facet_probe.audit import execute
from facet_probe.audit import plan as audit
from facet_probe.audit.manifest import build_manifest
from facet_probe.config.schema import settings_suffix
from facet_probe.core.prompts import PromptMode
from facet_probe.core.trials import SCORER_VERSION, fingerprint_hash
from facet_probe.facets.option_order import OptionOrder
from facet_probe.runners.policies import OraclePolicy
from facet_probe.store.reading import load_trial_frame
from facet_probe.store.trial_store import TrialStore
from facet_probe_dev.testing.fake_providers import FakeProviderServer
from facet_probe_dev.testing.in_process import Ran, run_module

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = Path(__file__).parents[1] / "fixtures"
EXIT_INCOMPLETE = 3
MCQ = ["facet=option_order", "dataset=synthetic_mcq"]


def app(module: str, *args: str, env: dict | None = None) -> Ran:
    """`python -m <module> <args>` from the repository root, in this process (the shared harness)."""
    return run_module(module, *args, env=env, cwd=ROOT)


def audit_in(run: Path, *overrides: str, **kw) -> Ran:
    return app("facet_probe", f"hydra.run.dir={run}", "progress=false", *overrides, **kw)


def lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line]


def status_of(run: Path) -> dict:
    return json.loads((run / "run_status.json").read_text())


# ---------------------------------------------------------------- 1, 5: one folder, one set of settings

@pytest.mark.slow  # 1.5 s or more: left out of `make test-fast`
def test_a_subset_rerun_into_a_run_folder_is_refused_and_changes_nothing(tmp_path):
    run = tmp_path / "run"
    assert audit_in(run, "model=oracle", *MCQ, "limit=12").returncode == 0
    before = {name: (run / name).read_bytes() for name in ("items.jsonl", "manifest.parquet", "summary.csv",
                                                           "report.md", "trials.jsonl", "config.yaml")}
    proc = audit_in(run, "model=oracle", *MCQ, "limit=4")
    assert proc.returncode == 2, proc.stderr
    assert "limit: 12 -> 4" in proc.stderr and "hydra.run.dir" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert {name: (run / name).read_bytes() for name in before} == before


@pytest.mark.slow  # 1.5 s or more: left out of `make test-fast`
@pytest.mark.parametrize("change", ["k=4", "seed=7", "model.seed=3", "prompt.cot=true"])
def test_a_folder_refuses_every_other_setting_that_changes_the_calls(tmp_path, change):
    run = tmp_path / "run"
    assert audit_in(run, "model=seeded_random", *MCQ, "limit=3").returncode == 0
    proc = audit_in(run, "model=seeded_random", *MCQ, "limit=3", change)
    assert proc.returncode == 2 and "holds a run of other settings" in proc.stderr, proc.stderr
    assert len(lines(run / "trials.jsonl")) == 18


@pytest.mark.slow
def test_settings_that_change_no_call_share_the_folder(tmp_path):
    run = tmp_path / "run"
    assert audit_in(run, "model=oracle", *MCQ, "limit=3").returncode == 0
    proc = audit_in(run, "model=oracle", *MCQ, "limit=3", "bootstrap=50", "store.wait_for_lock=true")
    assert proc.returncode == 0, proc.stderr
    assert status_of(run)["models"]["oracle"]["already_done"] == 18


def test_changed_data_under_the_same_settings_is_refused(tmp_path):
    items = tmp_path / "items.jsonl"
    rows = [{"item_id": f"mine::q{i}", "dataset": "mine", "question": f"Which is {i}?",
             "choices": [f"{i}", f"{i + 1}", f"{i + 2}"], "gold_index": 0} for i in range(4)]
    items.write_text("".join(json.dumps(r) + "\n" for r in rows))
    args = ["model=oracle", "facet=option_order", "dataset=items_jsonl", f"dataset.path={items}"]
    run = tmp_path / "run"
    assert audit_in(run, *args).returncode == 0
    items.write_text("".join(json.dumps(r) + "\n" for r in rows[:3]))
    proc = audit_in(run, *args)
    assert proc.returncode == 2 and "was drawn for 4 items" in proc.stderr, proc.stderr
    assert len((run / "items.jsonl").read_text().splitlines()) == 4


def test_the_folder_name_carries_every_override_that_changes_the_calls():
    assert settings_suffix(["model=oracle", "facet=option_order", "k=4", "seed=1", "progress=false",
                            "store.shard=0/2", "bootstrap=10", "prompt.cot=true"]) == ""
    assert settings_suffix(["limit=10"]) == "_limit=10"
    assert settings_suffix(["model.generation.temperature=0.7", "limit=10"]) == \
        "_limit=10,model.generation.temperature=0.7"
    assert settings_suffix(["+model.latency_s=0.1"]) == "_model.latency_s=0.1"
    assert settings_suffix(["dataset.path=/data/my items.jsonl"]) == "_dataset.path=_data_my_items.jsonl"
    assert "pw" not in settings_suffix(["model.base_url=http://u:pw@h:8/v1"])
    long = settings_suffix([f"model.generation.x{i}=1" for i in range(9)])
    assert long.startswith("_settings-") and len(long) == len("_settings-") + 10


@pytest.mark.slow
def test_a_sweep_over_a_setting_gets_one_folder_per_grid_point(tmp_path):
    proc = app("facet_probe", "-m", "model=seeded_random", *MCQ, "limit=2", "model.seed=1,2", "progress=false",
               f"hydra.sweep.dir={tmp_path}")
    assert proc.returncode == 0, proc.stderr
    folders = sorted(p.parent.name for p in tmp_path.rglob("trials.jsonl"))
    assert folders == ["direct-k6-seed42_limit=2,model.seed=1", "direct-k6-seed42_limit=2,model.seed=2"]


@pytest.mark.slow  # 1.5 s or more: left out of `make test-fast`
def test_default_folders_of_two_limits_are_two_folders(tmp_path):
    for limit in (2, 3):
        proc = app("facet_probe", "model=oracle", *MCQ, f"limit={limit}", "progress=false", f"out_root={tmp_path}")
        assert proc.returncode == 0, proc.stderr
    items = {p.parent.name: len(p.read_text().splitlines()) for p in tmp_path.rglob("items.jsonl")}
    assert items == {"direct-k6-seed42_limit=2": 2, "direct-k6-seed42_limit=3": 3}


# ---------------------------------------------------------------- 2: each configured model gets its trials

def test_two_model_names_with_one_fingerprint_each_get_their_trials(tmp_path):
    from facet_probe.datasets.synthetic.mcq import SyntheticMCQ

    items = SyntheticMCQ("synthetic_mcq").load(limit=3)
    facet = OptionOrder()
    cells = [audit.Cell("option_order", facet, "synthetic_mcq", items)]
    rows = build_manifest(items, facet, k=6, seed=42)
    runner = OraclePolicy()
    fp = fingerprint_hash(runner.fingerprint())
    with TrialStore(tmp_path / "trials.jsonl") as store:
        first = execute.run_model(runner, "oracle", fp, audit.plan_trials(cells, rows, "oracle", fp, PromptMode.DIRECT),
                                store, show_progress=False)
        second = execute.run_model(runner, "oracle_copy", fp,
                                 audit.plan_trials(cells, rows, "oracle_copy", fp, PromptMode.DIRECT), store,
                                 show_progress=False)
    assert (first.called, second.already_done, second.reused, second.called) == (18, 0, 18, 0)
    frame = load_trial_frame(tmp_path / "trials.jsonl")
    assert frame.groupby("model").size().to_dict() == {"oracle": 18, "oracle_copy": 18}


# ---------------------------------------------------------------- 3: a report reads one manifest

def test_rereporting_a_folder_that_mixes_k_reads_its_manifest_only(tmp_path):
    folder = shutil.copytree(FIXTURES / "store_v1_mixed_k", tmp_path / "mixed")
    proc = app("facet_probe.report", f"input={folder}", f"out={tmp_path / 'rep'}")
    assert proc.returncode == 0, proc.stderr
    trials = pd.read_parquet(tmp_path / "rep" / "trials.parquet")
    assert len(trials) == 24 and trials.groupby("item_id").size().eq(6).all()
    assert "16 stored trials of other settings" in (tmp_path / "rep" / "report.md").read_text()
    # the same folder reported fresh at k=6 gives the same numbers as a clean k=6 run of the same answers
    manifest = pd.read_parquet(folder / "manifest.parquet")
    assert set(trials["permutation"].map(tuple)) == set(manifest["permutation"].map(tuple))


def test_a_bare_trials_file_that_mixes_runs_is_refused_naming_the_mix(tmp_path):
    proc = app("facet_probe.report", f"input={FIXTURES / 'store_v1_mixed_k' / 'trials.jsonl'}",
               f"out={tmp_path / 'rep'}")
    assert proc.returncode == 2
    assert "answered more than once" in proc.stderr and "give its run folder" in proc.stderr
    assert "Traceback" not in proc.stderr


# ---------------------------------------------------------------- 4: a shard says it is one

@pytest.mark.slow
def test_a_shard_reports_its_part_as_a_shard_and_the_merge_as_the_run(tmp_path):
    run = tmp_path / "run"
    for shard in ("0/2", "1/2"):
        proc = audit_in(run, "model=oracle", *MCQ, "limit=10", f"store.shard={shard}")
        assert proc.returncode == 0, proc.stderr
    assert not (run / "summary.csv").exists()  # no shard stands in the folder's summary
    shard0 = run / "shards" / "0-of-2"
    report = (shard0 / "report.md").read_text()
    n0 = int(pd.read_csv(shard0 / "summary.csv")["n_items"].iloc[0])
    assert 0 < n0 < 10 and f"covers {n0} of the run's 10 items" in report and "Shard 0/2 only" in report
    proc = app("facet_probe.report", f"input={run}")
    assert proc.returncode == 0, proc.stderr
    summary = pd.read_csv(run / "summary.csv")
    assert summary["n_items"].tolist() == [10] and summary["n_trials_missing"].tolist() == [0]


# ---------------------------------------------------------------- 6: older stores resume without calls

@pytest.mark.slow
def test_a_store_written_by_older_code_is_rekeyed_not_recalled(tmp_path):
    run = shutil.copytree(FIXTURES / "store_v1", tmp_path / "run")
    old = {(t["item_id"], t["ordering_idx"]): t["raw_output"] for t in lines(run / "trials.jsonl")}
    args = ["model=seeded_random", *MCQ, "limit=3"]
    proc = audit_in(run, *args)
    assert proc.returncode == 0, proc.stderr
    counts = status_of(run)["models"]["seeded_random"]
    assert (counts["migrated"], counts["called"], counts["reused"]) == (18, 0, 0)
    assert audit_in(run, *args).returncode == 0
    assert status_of(run)["models"]["seeded_random"]["already_done"] == 18
    trials = pd.read_parquet(run / "trials.parquet")
    assert len(trials) == 18 and (trials["key_version"] == 2).all()
    assert {(t.item_id, t.ordering_idx): t.raw_output for t in trials.itertuples()} == old
    proc = app("facet_probe.report", f"input={run}", f"out={tmp_path / 'rep'}")
    assert proc.returncode == 0 and len(pd.read_parquet(tmp_path / "rep" / "trials.parquet")) == 18


# ---------------------------------------------------------------- 7: incomplete is never reported as complete

@pytest.mark.slow  # over 2 s (measured in make test-fast, 2026-12-05)
def test_missing_trials_are_reported_per_cell_and_exit_with_code_3(tmp_path):
    run = tmp_path / "run"
    args = ["model=openai_compat", "model.model_id=served", "model.verify_model=false",
            "model.concurrency.max_retries=0", "model.concurrency.initial=1", "model.concurrency.max_in_flight=1",
            *MCQ, "limit=3"]
    env = {"OPENAI_API_KEY": "sk-test"}
    with FakeProviderServer(script=["bad_request"]) as server:
        proc = audit_in(run, *args, f"model.base_url={server.url}/v1", env=env)
        assert proc.returncode == EXIT_INCOMPLETE, proc.stderr
        assert "1 of 18 trials are missing" in proc.stderr
        summary = pd.read_csv(run / "summary.csv")
        assert summary[["n_trials_expected", "n_trials_missing", "n_items_short"]].values.tolist() == [[18, 1, 1]]
        assert "Incomplete: 1 trial missing" in (run / "report.md").read_text()
        short = pd.read_csv(run / "missing_trials.csv")
        assert short[["expected", "missing"]].values.tolist() == [[6, 1]]
        assert status_of(run)["state"] == "incomplete"
        proc = audit_in(run, *args, f"model.base_url={server.url}/v1", env=env)  # the retry completes it
    assert proc.returncode == 0, proc.stderr
    assert pd.read_csv(run / "summary.csv")["n_trials_missing"].tolist() == [0]
    assert not (run / "missing_trials.csv").exists() and "Incomplete" not in (run / "report.md").read_text()
    assert status_of(run)["state"] == "complete"


# ---------------------------------------------------------------- panels: every model is checked first

def test_a_panel_checks_every_models_key_before_the_first_call(tmp_path):
    run = tmp_path / "run"
    env = {k: "" for k in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GOOGLE_API_KEY", "GEMINI_API_KEY")}
    proc = audit_in(run, "experiment.models=[oracle,gpt_54_mini]", *MCQ, "limit=2", env=env)
    assert proc.returncode == 2 and "OPENAI_API_KEY" in proc.stderr, proc.stderr
    trials = run / "trials.jsonl"
    assert not trials.exists() or trials.read_text() == ""  # the oracle spent nothing first


# ---------------------------------------------------------------- re-scored from what was said (issue 21.6)

def test_a_parser_change_reaches_a_stored_run_without_a_call(tmp_path):
    """A reply the old parser could not read ("Answer: Option B") is read by today's, at report time."""
    run = shutil.copytree(FIXTURES / "store_v1", tmp_path / "run")
    records = lines(run / "trials.jsonl")
    target = records[4]
    target.update(raw_output="Answer: Option B", answer_raw=None, answer_normalized="<parse_error>",
                  correct=False, parse_status="parse_error")  # as the old parser stored it
    (run / "trials.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    proc = audit_in(run, "model=seeded_random", *MCQ, "limit=3")
    assert proc.returncode == 0, proc.stderr
    assert status_of(run)["models"]["seeded_random"]["called"] == 0
    trials = pd.read_parquet(run / "trials.parquet")
    assert (trials["scorer_version"] == SCORER_VERSION).all()  # today's scorer
    row = trials[(trials.item_id == target["item_id"]) & (trials.ordering_idx == target["ordering_idx"])].iloc[0]
    shown = "ABCD".index("B")
    assert row["parse_status"] == "fallback" and row["answer_raw"] == "B"
    assert row["answer_normalized"] == "ABCD"[int(row["permutation"][shown])]
    assert pd.read_csv(run / "summary.csv")["parse_rate"].tolist() == [1.0]


# ---------------------------------------------------------------- a dataset that gives fewer items than asked (issue 22.3)

@pytest.mark.slow  # over 2 s (measured in make test-fast, 2026-12-05)
def test_fewer_items_than_asked_fail_unless_allowed_and_are_recorded(tmp_path):
    items = tmp_path / "items.jsonl"
    items.write_text("".join(json.dumps({"item_id": f"mine::q{i}", "dataset": "mine", "question": f"Which is {i}?",
                                         "choices": [f"{i}", f"{i + 1}", f"{i + 2}"], "gold_index": 0}) + "\n"
                             for i in range(4)))
    args = ["model=oracle", "facet=option_order", "dataset=items_jsonl", f"dataset.path={items}", "dataset.n=10"]
    proc = audit_in(tmp_path / "refused", *args)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert "4 items pass its filter" in proc.stderr and "10 are asked" in proc.stderr
    assert " dataset.allow_partial=true" in proc.stderr and not (tmp_path / "refused" / "trials.jsonl").exists()
    run = tmp_path / "partial"
    assert audit_in(run, *args, "dataset.allow_partial=true").returncode == 0  # conf/dataset/_base.yaml: no `+`
    assert status_of(run)["dataset_shortfall"] == {"items_jsonl": {"asked": 10, "found": 4}}
    assert "Dataset items_jsonl: 4 of the 10 items asked" in (run / "report.md").read_text()
    assert audit_in(tmp_path / "limited", *args, "limit=3").returncode == 0  # limit=3 asks for 3: no shortfall
