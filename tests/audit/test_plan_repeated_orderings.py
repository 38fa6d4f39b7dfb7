"""Repeated orderings (n! < K, issue 21.9): each of the K rows is its own call by default, as the paper
asked ("repeat as needed to keep six calls"); `share_repeated_orderings=true` serves a repeated ordering
from its first call (greedy decoding). Calls already paid for are never paid for again."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from facet_probe.audit import execute
from facet_probe.audit import plan as audit
from facet_probe.audit.manifest import build_manifest
from facet_probe.core.prompts import PromptMode
from facet_probe.core.trials import call_key, fingerprint_hash
from facet_probe.datasets.items_jsonl import ItemsJsonl
from facet_probe.facets.option_order import OptionOrder
from facet_probe.runners.policies import SeededRandomPolicy
from facet_probe.store.trial_store import TrialStore
from facet_probe_dev.testing.in_process import Ran, run_module

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = Path(__file__).parents[1] / "fixtures"
ITEMS = "tests/fixtures/two_option_items.jsonl"  # 3 items of 2 options: 2! = 2 orderings for K = 6 rows
ARGS = ["model=seeded_random", "facet=option_order", "dataset=items_jsonl", f"dataset.path={ITEMS}"]


def audit_in(run: Path, *overrides: str) -> Ran:
    """The audit into `run` from the repository root (ITEMS is relative to it), in this process."""
    return run_module("facet_probe", f"hydra.run.dir={run}", "progress=false", *overrides, cwd=ROOT)


def counts(run: Path) -> dict:
    return json.loads((run / "run_status.json").read_text())["models"]["seeded_random"]


def lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line]


def planned(share: bool, repeats: int = 1) -> tuple[list[audit.PlannedTrial], str]:
    items = ItemsJsonl(name="items_jsonl", path=str(FIXTURES / "two_option_items.jsonl")).load()
    facet = OptionOrder()
    cells = [audit.Cell("option_order", facet, "two", items)]
    rows = build_manifest(items, facet, k=6, seed=42, repeats=repeats)
    fp = fingerprint_hash(SeededRandomPolicy().fingerprint())
    return audit.plan_trials(cells, rows, "seeded_random", fp, PromptMode.DIRECT,
                             share_repeated_orderings=share), fp


def test_each_repeat_of_an_ordering_gets_its_own_call_key_counted_per_repeat():
    plans, fp = planned(share=False, repeats=2)
    assert len({p.call_key for p in plans}) == len(plans) == 36
    for p in plans:  # the first row of each ordering keeps the key it always had (no stored call re-paid)
        same = [q for q in plans if (q.row.item_id, q.row.repeat_idx, q.row.permutation)
                == (p.row.item_id, p.row.repeat_idx, p.row.permutation)]
        first = min(same, key=lambda q: q.row.ordering_idx)
        assert (p.call_key == call_key(fp, p.prompt.hash, p.row.repeat_idx)) == (p is first)
        j = sorted(q.row.ordering_idx for q in same).index(p.row.ordering_idx)
        assert p.call_key == call_key(fp, p.prompt.hash, p.row.repeat_idx, occurrence=j)


def test_sharing_keeps_one_key_per_ordering_and_repeat():
    plans, fp = planned(share=True, repeats=2)
    assert len({p.call_key for p in plans}) == 3 * 2 * 2
    assert all(p.call_key == call_key(fp, p.prompt.hash, p.row.repeat_idx) for p in plans)


@pytest.mark.parametrize(("share", "called"), [(False, 18), (True, 6)])
def test_run_model_makes_k_calls_per_item_unless_shared(tmp_path, share, called):
    plans, fp = planned(share=share)
    with TrialStore(tmp_path / "trials.jsonl") as store:
        got = execute.run_model(SeededRandomPolicy(), "seeded_random", fp, plans, store, show_progress=False)
    assert (got.planned, got.called, got.reused) == (18, called, 0)
    assert len({t["call_key"] for t in lines(tmp_path / "trials.jsonl")}) == called


@pytest.mark.slow
def test_the_audit_asks_k_times_by_default_and_shares_under_the_switch(tmp_path):
    proc = audit_in(tmp_path / "own", *ARGS)
    assert proc.returncode == 0, proc.stderr
    assert (counts(tmp_path / "own")["called"], counts(tmp_path / "own")["reused"]) == (18, 0)
    proc = audit_in(tmp_path / "shared", *ARGS, "share_repeated_orderings=true")
    assert proc.returncode == 0, proc.stderr
    assert counts(tmp_path / "shared")["called"] == 6
    settings = json.loads((tmp_path / "shared" / "run_identity.json").read_text())["settings"]
    assert settings["share_repeated_orderings"] is True  # the run records which mode it used
    own = json.loads((tmp_path / "own" / "run_identity.json").read_text())["settings"]
    assert own["share_repeated_orderings"] is False


def test_a_store_written_with_shared_orderings_resumes_without_calls_under_the_switch(tmp_path):
    run = shutil.copytree(FIXTURES / "store_shared_orderings", tmp_path / "run")  # written by the old code
    old = {(t["item_id"], t["ordering_idx"]): t["raw_output"] for t in lines(run / "trials.jsonl")}
    proc = audit_in(run, *ARGS, "share_repeated_orderings=true")
    assert proc.returncode == 0, proc.stderr
    assert (counts(run)["already_done"], counts(run)["called"], counts(run)["migrated"]) == (18, 0, 0)
    trials = pd.read_parquet(run / "trials.parquet")
    assert {(t.item_id, t.ordering_idx): t.raw_output for t in trials.itertuples()} == old


def test_a_store_written_with_shared_orderings_calls_only_the_rows_never_asked_by_default(tmp_path):
    run = shutil.copytree(FIXTURES / "store_shared_orderings", tmp_path / "run")
    first_of_call = {}  # the old code asked each call once: its first row; the others shared that answer
    for t in lines(run / "trials.jsonl"):
        first_of_call.setdefault(t["call_key"], (t["item_id"], t["ordering_idx"], t["raw_output"]))
    assert len(first_of_call) == 6
    proc = audit_in(run, *ARGS)
    assert proc.returncode == 0, proc.stderr
    assert (counts(run)["already_done"], counts(run)["called"], counts(run)["reused"]) == (6, 12, 0)
    trials = pd.read_parquet(run / "trials.parquet")  # the run's 18 trials, each now its own call
    assert len(trials) == 18 and trials["call_key"].nunique() == 18
    kept = {(t.item_id, t.ordering_idx, t.raw_output) for t in trials.itertuples()}
    assert set(first_of_call.values()) <= kept  # the calls already paid for are the run's, unchanged
    assert set(first_of_call) <= set(trials["call_key"])
