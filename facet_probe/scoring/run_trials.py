"""Which stored trials make up a run, and which it lacks.

A run is its manifest (items x orderings x repeats, one seed and K) answered by each of its models under
one fingerprint. A trials file can hold more: trials of other settings written into the folder before
folders carried one set of settings, or of a model retrained in place. A report reads exactly the run's
trials (each record's key is recomputed from the manifest row it claims to answer) and says, per cell,
how many trials are missing and which items are scored on fewer orderings than asked.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from facet_probe.core.errors import ConfigError
from facet_probe.core.trials import KEY_SEP, key_digest, trial_key, trial_keys_of
from facet_probe.scoring.rescore import SCORE_FIELDS, rescore
from facet_probe.store.reading import SETTING_COLUMNS, load_trial_frame
from facet_probe.store.run_folder import ItemKey, RunFolder, run_inputs

#: What one trial answers: a model's reply to one manifest row.
ROW_KEYS = ["model", "facet", "dataset", "item_id", "ordering_idx", "repeat_idx"]
CELL_KEYS = ["model", "facet", "dataset"]


class MixedRunError(ConfigError):
    """The trials given hold more than one run's answers to the same rows, and nothing says which to read
    (a user error in every app: one message, exit code 2)."""


@dataclass
class RunScope:
    """What a report covers: the expected trials (one row per model x manifest row) and, per model, the
    fingerprint whose trials count. `trial_keys`, when the run that just finished knows them, are the exact
    keys it planned; `shard` and `run_items` say when this is one shard of a larger run."""

    expected: pd.DataFrame
    fingerprints: dict[str, str]
    shard: str | None = None
    run_items: int | None = None
    trial_keys: frozenset[str] | None = None
    shortfalls: dict[str, dict] = field(default_factory=dict)  # datasets that gave fewer items than asked


#: The manifest columns a run's scope is read from.
MANIFEST_COLUMNS = ["facet", "dataset", "item_id", "ordering_idx", "repeat_idx", "seed", "k"]


def expected_trials(manifest: pd.DataFrame, models: list[str]) -> pd.DataFrame:
    """Manifest rows x models: every trial the run asks for."""
    rows = manifest[MANIFEST_COLUMNS]
    return pd.concat([rows.assign(model=m) for m in models], ignore_index=True)


def folder_scope(folder: RunFolder, trials: pd.DataFrame) -> RunScope | None:
    """The scope of a run folder: its manifest, and the models (with their current fingerprints) that
    run_status.json records, else those whose trials are in the folder. None without a manifest."""
    manifest = folder.manifest(MANIFEST_COLUMNS)
    if manifest is None:
        return None
    status = folder.status()
    models = sorted(status.models) or sorted(set(trials["model"].dropna().astype(str).unique()))
    return RunScope(expected_trials(manifest, models), status.fingerprint_hashes(),
                    shortfalls=status.dataset_shortfall)


def select_run_trials(trials: pd.DataFrame, scope: RunScope) -> tuple[pd.DataFrame, int]:
    """The trials that answer the scope's manifest rows under each model's fingerprint; and how many
    stored trials were left out (other settings). Raises MixedRunError where a model has trials of several
    fingerprints and the scope does not say which is current."""
    if scope.trial_keys is not None:  # the run that just finished: exactly what it planned
        selected = trials[trials["trial_key"].isin(scope.trial_keys)].reset_index(drop=True)
        return selected, len(trials) - len(selected)
    keys = ["facet", "dataset", "item_id", "ordering_idx", "repeat_idx"]
    rows = scope.expected.drop_duplicates(keys).drop(columns="model")
    # the rows are chosen on the columns that choose them, and the trials' other columns taken once, for the
    # chosen rows (a merge of every column would copy a 400k-trial frame three times over)
    narrow = trials[[c for c in SELECT_COLUMNS if c in trials]].assign(_row=np.arange(len(trials)))
    joined = narrow.merge(rows, on=keys, how="inner", suffixes=("", "_manifest"))
    seed = joined["seed_manifest"] if "seed_manifest" in joined else joined["seed"]
    k = joined["k_manifest"] if "k_manifest" in joined else joined["k"]
    picked = _one_fingerprint_per_model(joined[_keyed(joined, seed, k)], scope.fingerprints)
    # one record per row: the newest key scheme, then the latest written (a row asked again after a
    # key change, e.g. a repeated ordering that is now a call of its own, beats its older shared record)
    version = picked["key_version"].fillna(1) if "key_version" in picked else 1
    written = picked["created_at"].fillna("") if "created_at" in picked else ""
    picked = (picked.assign(_v=version, _w=written).sort_values(["_v", "_w"], kind="stable")
              .drop_duplicates(ROW_KEYS, keep="last").reset_index(drop=True))
    chosen = picked["_row"].to_numpy()
    every_row_in_order = len(chosen) == len(trials) and bool((chosen == np.arange(len(chosen))).all())
    # a run folder holding only its own trials, in the order they were written: the frame as it is, not a copy of
    # every column (a 400k-trial read holds about 60 MB less after it)
    selected = (trials if every_row_in_order else trials.take(chosen)).reset_index(drop=True)
    for name in rows.columns:  # what the manifest says and the trials do not (seed, k of older records)
        if name not in trials and name in picked:
            selected[name] = picked[name]
    return selected, len(trials) - len(selected)


#: The columns that choose a run's trials (`select_run_trials`).
SELECT_COLUMNS = (*ROW_KEYS, "trial_key", "call_key", "seed", "k", "model_fingerprint", "key_version", "created_at")


def _keyed(joined: pd.DataFrame, seed: pd.Series, k: pd.Series) -> np.ndarray:
    """Per row: is its `trial_key` a key of the trial it claims (`_keyed_for`, the manifest's `seed` and `k`)? Rows
    whose key is the current scheme's pass on `current_trial_keys` (one hash a row, formatted by Arrow); only the
    others (older schemes, fields that are not plain strings and ints) go through `_keyed_for`."""
    stored = joined["trial_key"].tolist()
    current = current_trial_keys(joined, seed, k)
    belongs = np.fromiter((c is not None and c == t for c, t in zip(current, stored, strict=True)), bool,
                          len(stored))
    if not belongs.all():
        rest = np.flatnonzero(~belongs)
        part = joined.iloc[rest]
        columns = [part[c].tolist() for c in ("trial_key", "call_key", "model", "facet", "item_id", "ordering_idx")]
        belongs[rest] = [_keyed_for(tk, ck, m, f, i, int(o), int(s), int(kk)) for tk, ck, m, f, i, o, s, kk in zip(
            *columns, seed.iloc[rest].tolist(), k.iloc[rest].tolist(), strict=True)]
    return belongs


#: The columns of the fields `core.trials.trial_key` hashes, in its order: (call, model, facet, item_id) text, then
#: (ordering_idx, seed, k) integers.
_KEY_TEXT = ("call_key", "model", "facet", "item_id")


def current_trial_keys(joined: pd.DataFrame, seed: pd.Series, k: pd.Series) -> list[str | None]:
    """`core.trials.trial_key` of every row (its call_key, model, facet, item_id and ordering_idx, and `seed` and
    `k`), the fields joined by Arrow and hashed in one loop (a 400k-trial run's check: a third of the time of one
    `trial_key` call a row); None for a row with a missing field, and for every row where a text field is not
    strings or a number not integers (`_keyed_for` checks those)."""
    texts = [joined[c] for c in _KEY_TEXT]
    numbers = [joined["ordering_idx"], seed, k]
    if not all(isinstance(c.dtype, pd.StringDtype) for c in texts) or not all(
            isinstance(c.dtype, np.dtype) and c.dtype.kind in "iu" for c in numbers):
        return [None] * len(joined)
    parts = [pc.cast(pa.array(c.array), pa.large_string()) for c in texts]
    parts += [pc.cast(pa.array(c.to_numpy()), pa.large_string()) for c in numbers]
    raw = pc.binary_join_element_wise(*parts, pa.scalar(KEY_SEP, pa.large_string()))
    return [None if r is None else key_digest(r) for r in pc.cast(raw, pa.large_binary()).to_pylist()]


def _keyed_for(tk: str, ck: str, model: str, facet: str, item_id: str, ordering: int, seed: int, k: int) -> bool:
    """Is `tk` a key of this row's trial, in any scheme (`trial_keys_of`)? The current scheme is tried first and
    the older ones only when it fails: one hash per record instead of one per scheme (400k-trial reports)."""
    return tk == trial_key(ck, model, facet, item_id, ordering, seed, k) or tk in trial_keys_of(
        ck, model, facet, item_id, ordering, seed, k)


def _one_fingerprint_per_model(trials: pd.DataFrame, current: dict[str, str]) -> pd.DataFrame:
    keep = []
    for model, group in trials.groupby("model", sort=True):
        prints = group["model_fingerprint"].value_counts()
        if model in current:
            keep.append(group[group["model_fingerprint"] == current[model]])
        elif len(prints) == 1:
            keep.append(group)
        else:
            mix = ", ".join(f"{fp} ({n} trials)" for fp, n in prints.items())
            raise MixedRunError(
                f"model {model} has trials of {len(prints)} fingerprints in this run folder: {mix}, and "
                "run_status.json does not say which is current; re-run the audit command (it records it) "
                "or report the trials of one fingerprint")
    return pd.concat(keep, ignore_index=True) if keep else trials.iloc[0:0]


#: Per trial, the value that tells apart the runs a bare trials file holds (the decoder: its temperature).
RunsApart = Callable[[pd.DataFrame], pd.Series]


def check_one_run(trials: pd.DataFrame, where: str) -> None:
    """Without a manifest (a bare trials file): refuse trials that answer the same row more than once."""
    twice = trials[trials.duplicated(ROW_KEYS, keep=False)]
    if twice.empty:
        return
    first = twice.iloc[0]
    n_rows = len(twice.drop_duplicates(ROW_KEYS))
    raise MixedRunError(
        f"{where}: {n_rows} (model, item, ordering, repeat) rows are answered more than once by trials of "
        f"different settings (e.g. model {first['model']}, {first['facet']}/{first['dataset']} item "
        f"{first['item_id']} ordering {first['ordering_idx']}: {len(twice[_same_row(twice, first)])} trials); "
        f"each input must be one run: give its run folder, whose manifest selects its trials{_settings_apart(twice)}")


def _settings_apart(twice: pd.DataFrame) -> str:
    """What tells apart trials that answer one row, where a setting column does (a file of several temperatures)."""
    return "".join(f"; they differ in their `{c}` column ({', '.join(map(str, sorted(twice[c].dropna().unique())))}): "
                   f"a grid in one file, which `python -m facet_probe.decoder` reads per {c}; give the other apps one "
                   f"{c}'s trials" for c in SETTING_COLUMNS if c in twice and twice[c].nunique(dropna=False) > 1)


def check_bare_runs(trials: pd.DataFrame, where: str, runs_apart: RunsApart | None = None) -> None:
    """`check_one_run` on a bare trials file's trials: all of them, or each run `runs_apart` tells apart."""
    if runs_apart is None:
        check_one_run(trials, where)
        return
    apart = runs_apart(trials)
    for value, run in trials.groupby(apart, dropna=False, sort=True):
        check_one_run(run, f"{where} ({apart.name} {value})")


def _same_row(frame: pd.DataFrame, row: pd.Series) -> pd.Series:
    mask = pd.Series(True, index=frame.index)
    for key in ROW_KEYS:
        mask &= frame[key] == row[key]
    return mask


def completeness(trials: pd.DataFrame, scope: RunScope) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Per cell: trials expected and missing, items scored on fewer trials than asked; and those items."""
    expected = scope.expected[ROW_KEYS].drop_duplicates()
    present = trials[ROW_KEYS].drop_duplicates().assign(_present=1)
    marked = expected.merge(present, on=ROW_KEYS, how="left")
    marked["missing"] = marked["_present"].isna().astype(int)
    per_item = (marked.groupby(CELL_KEYS + ["item_id"], sort=True)
                .agg(expected=("missing", "size"), missing=("missing", "sum")).reset_index())
    short = per_item[per_item["missing"] > 0].reset_index(drop=True)
    cells = (per_item.groupby(CELL_KEYS, sort=True)
             .agg(n_trials_expected=("expected", "sum"), n_trials_missing=("missing", "sum"),
                  n_items_short=("missing", lambda m: int((m > 0).sum()))).reset_index())
    return cells, short


@dataclass
class RunTrials:
    """The trials of one or more runs as the apps read them (report, judge, ODI), with their runs' items."""

    trials: pd.DataFrame
    scope: RunScope | None  # None when no input had a manifest (bare trials files)
    left_out: int = 0  # stored trials of other settings, not read
    items: dict[ItemKey, dict] = field(default_factory=dict)  # the item records of the runs' items.jsonl


#: What reading a run needs besides what its reader asks for: the columns that select its trials
#: (`select_run_trials`) and that score them again (`rescore`).
RUN_COLUMNS = (*ROW_KEYS, "trial_key", "call_key", "seed", "k", "model_fingerprint", "key_version", "created_at",
               "mode", "permutation", "prompt_hash", "raw_output", "instruction", "scorer_version", *SCORE_FIELDS)
#: What a reader of scores leaves out: what the calls cost and where they ran (the report's provenance and the
#: paper's token counts read them).
CALL_RECORDS = ("provenance", "usage")


def read_run(run: RunFolder | str | Path, columns: Iterable[str] | None = None, drop: Iterable[str] = (),
             runs_apart: RunsApart | None = None, scope: RunScope | None = None) -> RunTrials:
    """One input: a run folder's trials through its manifest (one K, seed and fingerprint per model), or a
    bare trials file's (or a manifest-less folder's), refused when it answers one row twice (within each value of
    `runs_apart`, where given); trials an older scorer scored are scored again from their replies (`rescore`), with
    the items of the folder (a trials file's own folder). `scope`: the run that just finished (its planned trials),
    in place of the folder's manifest, e.g. over one shard's trials file (`RunFolder.trials_file`). `columns` and
    `drop` as `load_trial_frame`'s (RUN_COLUMNS are always read)."""
    path = run.path if isinstance(run, RunFolder) else Path(run)
    folder = RunFolder(path if path.is_dir() else path.parent)
    stored = load_trial_frame(path, None if columns is None else (*columns, *RUN_COLUMNS),
                              [c for c in drop if c not in RUN_COLUMNS])
    items = folder.items()
    scope = scope or (folder_scope(folder, stored) if path.is_dir() else None)
    if scope is not None:
        trials, left_out = select_run_trials(stored, scope) if not stored.empty else (stored, 0)  # every call failed
    else:
        check_bare_runs(stored, str(path), runs_apart)
        trials, left_out = stored, 0
    return RunTrials(rescore(trials, items), scope, left_out, items)


def read_runs(inputs: str | Path | Iterable[str | Path], columns: Iterable[str] | None = None,
              drop: Iterable[str] = (), runs_apart: RunsApart | None = None) -> RunTrials:
    """Several inputs (run folders, folders of run folders, trials files) read one by one (`read_run`) and put
    together."""
    columns, drop = None if columns is None else tuple(columns), tuple(drop)
    return combine_runs([read_run(p, columns, drop, runs_apart) for p in run_inputs(inputs)])


def combine_runs(parts: list[RunTrials]) -> RunTrials:
    """Runs read one by one (`read_run`), put together: their trials, scopes and left-out counts."""
    scopes = [p.scope for p in parts if p.scope is not None]
    scope = RunScope(pd.concat([s.expected for s in scopes], ignore_index=True), {},
                     shortfalls={k: v for s in scopes for k, v in s.shortfalls.items()}) if scopes else None
    return RunTrials(pd.concat([p.trials for p in parts], ignore_index=True), scope,
                     sum(p.left_out for p in parts), {k: v for p in parts for k, v in p.items.items()})
