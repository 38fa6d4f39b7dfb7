"""Choosing a run's trials (`scoring.run_trials.select_run_trials`): the key check, hashed a column at a time,
keeps exactly the rows the per-row rule keeps (`_keyed_for`: the current scheme or an older one)."""

from __future__ import annotations

import pandas as pd

from facet_probe.core.trials import trial_key, trial_key_v1
from facet_probe.scoring.run_trials import (
    MANIFEST_COLUMNS,
    RunScope,
    _keyed_for,
    current_trial_keys,
    expected_trials,
    select_run_trials,
)


def trial_rows() -> pd.DataFrame:
    """Six trials of one model: current keys, a scheme-1 key, a key of another K, a foreign key, and a
    non-ASCII item id."""
    rows = []
    for i, (item, key_of) in enumerate([("a", "current"), ("b", "current"), ("ç-☃", "current"), ("c", "v1"),
                                        ("d", "other_k"), ("e", "foreign")]):
        call = f"call{i}"
        key = {"current": trial_key(call, "m", "option_order", item, 1, 42, 6),
               "v1": trial_key_v1(call, "option_order", item, 1, 42, 6),
               "other_k": trial_key(call, "m", "option_order", item, 1, 42, 5),
               "foreign": "0" * 24}[key_of]
        rows.append({"model": "m", "facet": "option_order", "dataset": "synthetic_mcq", "item_id": item,
                     "ordering_idx": 1, "repeat_idx": 0, "trial_key": key, "call_key": call, "seed": 42, "k": 6,
                     "model_fingerprint": "fp", "key_version": 1 if key_of == "v1" else 2,
                     "created_at": f"2026-01-0{i + 1}", "raw_output": f"reply {i}"})
    return pd.DataFrame(rows)


def scope_of(trials: pd.DataFrame) -> RunScope:
    manifest = trials[["facet", "dataset", "item_id", "ordering_idx", "repeat_idx"]].assign(seed=42, k=6)
    return RunScope(expected_trials(manifest[MANIFEST_COLUMNS], ["m"]), {"m": "fp"})


def test_the_column_keys_are_trial_key_of_every_row_and_none_where_a_field_is_missing():
    trials = trial_rows()
    seed, k = trials["seed"], trials["k"]
    expected = [trial_key(c, m, f, i, o, 42, 6) for c, m, f, i, o in zip(
        trials["call_key"], trials["model"], trials["facet"], trials["item_id"], trials["ordering_idx"], strict=True)]
    assert current_trial_keys(trials, seed, k) == expected
    missing = trials.assign(call_key=trials["call_key"].where(trials.index != 2))
    assert current_trial_keys(missing, seed, k) == [*expected[:2], None, *expected[3:]]
    assert current_trial_keys(trials, seed.astype(float), k) == [None] * len(trials)  # not integers: per row


def test_selection_keeps_exactly_the_rows_the_per_row_rule_keeps():
    trials = trial_rows()
    selected, left_out = select_run_trials(trials, scope_of(trials))
    by_rule = [_keyed_for(r.trial_key, r.call_key, r.model, r.facet, r.item_id, r.ordering_idx, 42, 6)
               for r in trials.itertuples()]
    assert by_rule == [True, True, True, True, False, False]
    assert selected["item_id"].tolist() == ["c", "a", "b", "ç-☃"]  # oldest scheme first, then by time written
    assert left_out == 2 and list(selected.columns) == list(trials.columns)
    assert selected["raw_output"].tolist() == ["reply 3", "reply 0", "reply 1", "reply 2"]


def test_trials_without_seed_and_k_get_the_manifests():
    trials = trial_rows()
    selected, _ = select_run_trials(trials.drop(columns=["seed", "k"]), scope_of(trials))
    assert list(selected.columns[-2:]) == ["seed", "k"]
    assert (selected["seed"] == 42).all() and (selected["k"] == 6).all() and len(selected) == 4
