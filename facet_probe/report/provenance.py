"""Where a report's numbers come from: per run, the models (ids, revisions or weight digests, settings sent,
sampling), K, seed, repeats, prompt mode, date, facet_probe version and git commit, tokens and API cost.

Read from each run folder's `run_status.json` (`store.run_folder.RunStatus`) and the trials' own provenance; shown at
the top of report.md and of the explorer page."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from facet_probe.core.untrusted import markdown_text
from facet_probe.datasets.base import skipped_line
from facet_probe.report.markdown import md_table
from facet_probe.store.columnar import distinct_objects
from facet_probe.store.run_folder import RunFolder, RunStatus

_MODEL_KEYS = ("model_id", "revision", "weights", "commit", "dtype", "quantization", "runner", "policy", "provider",
               "api")


def sampling(settings: dict[str, Any]) -> str:
    """'greedy' (temperature 0 or no sampling), 'sampled (temperature=..)', or the provider's default."""
    if not settings:
        return "deterministic policy"
    if settings.get("do_sample") is False:
        return "greedy"
    temp = settings.get("temperature")
    if temp is None:
        return "provider default (no temperature sent)"
    if float(temp) == 0.0:
        return "greedy (temperature 0)"
    extra = ", ".join(f"{k}={settings[k]}" for k in ("top_p", "top_k") if settings.get(k) is not None)
    return f"sampled (temperature={temp}{', ' + extra if extra else ''})"


def _token_counts(usage: Any) -> tuple[int, int]:
    """(prompt, completion) tokens of one trial's usage record, in either provider's names."""
    u = _plain(usage)
    return (u.get("prompt_tokens") or u.get("input_tokens") or 0,
            u.get("completion_tokens") or u.get("output_tokens") or 0)


def _plain(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return {}
    return value if isinstance(value, dict) else {}


def trial_costs(trials: pd.DataFrame) -> dict[str, dict[str, float]]:
    """Per model: tokens and the API cost its stored trials record (cost_usd of each call's provenance), each
    distinct provenance and usage read once (`store.columnar.distinct_objects`) and summed per model by numpy."""
    out: dict[str, dict[str, float]] = {}
    if trials is None or trials.empty or "model" not in trials:
        return out
    model, models = pd.factorize(trials["model"], use_na_sentinel=False)
    cost = _per_row(trials, "provenance", _cost)  # NaN where a call recorded no cost
    tokens = _per_row(trials, "usage", _token_counts)  # (prompt, completion) per row
    priced = np.bincount(model, ~np.isnan(cost[:, 0]), len(models))
    spent = np.bincount(model, np.nan_to_num(cost[:, 0]), len(models))
    prompt, completion = (np.bincount(model, tokens[:, j], len(models)) for j in (0, 1))
    for i, name in enumerate(models):
        out[str(name)] = {"cost_usd": float(spent[i]) if priced[i] else math.nan,
                          "prompt_tokens": int(prompt[i]), "completion_tokens": int(completion[i])}
    return out


def _per_row(trials: pd.DataFrame, column: str, fn: Callable[[Any], Any]) -> np.ndarray:
    """`fn` of each row's record in `column` (an empty record where the column is absent) as a float array of one
    row per trial, `fn` called once per distinct record (`store.columnar.distinct_objects`)."""
    codes, distinct = distinct_objects(trials[column].tolist() if column in trials else [{}] * len(trials))
    return np.array([fn(v) for v in distinct], dtype=float).reshape(len(distinct), -1)[codes]


def _cost(provenance: Any) -> float:
    """A call's cost_usd (NaN where it recorded none, or not a number)."""
    try:
        return float(_plain(provenance).get("cost_usd"))
    except (TypeError, ValueError):
        return math.nan


def run_name(folder: Path) -> str:
    """A run's name in reports and the explorer: the last three parts of its folder (model / scope / settings)."""
    path = folder.resolve()
    return "/".join(path.relative_to(path.anchor).parts[-3:])  # never the root's own "/" (a run at /tmp/x)


def run_provenance(folder: Path, trials: pd.DataFrame | None = None) -> dict[str, Any]:
    """One run's provenance as a JSON-safe dict (empty fields where the run recorded none)."""
    status = RunFolder(folder).status()
    settings = status.settings
    costs = trial_costs(trials) if trials is not None else {}
    models = {}
    for name, rec in status.models.items():
        fp = rec.fingerprint
        sent = fp.get("settings_sent") or fp.get("generation") or {}
        models[name] = {**{k: fp[k] for k in _MODEL_KEYS if fp.get(k) is not None},
                        "fingerprint": rec.fingerprint_hash, "settings_sent": sent,
                        "sampling": sampling(sent), **costs.get(name, {})}
    for name, cost in costs.items():  # trials of a model run_status.json does not list (older folders)
        models.setdefault(name, dict(cost))
    return {"run": run_name(folder), "folder": str(folder), "date": status.started_at,
            "k": settings.get("k"), "seed": settings.get("seed"), "repeats": settings.get("repeats"),
            "prompt_mode": settings.get("prompt_mode"), "limit": settings.get("limit"),
            "facet_probe": status.versions.get("facet_probe"), "git_commit": status.git_commit,
            "state": status.state, "models": models, "skipped_rows": skipped_rows(status)}


def skipped_rows(status: RunStatus) -> dict[str, dict[str, int]]:
    """Per dataset, the rows its loader left out as unusable, by reason (run_status.json `cells[].skipped_rows`)."""
    return {c.dataset: c.skipped_rows for c in status.cells if c.dataset and c.skipped_rows}


def _fmt(value: Any) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if isinstance(value, dict):
        return ", ".join(f"{k}={v}" for k, v in value.items() if v is not None) or "-"
    return str(value)


#: A run's settings its provenance line shows.
_SETTINGS = ("k", "seed", "repeats", "prompt_mode", "limit", "date", "facet_probe", "git_commit")


def render_provenance(runs: list[dict[str, Any]]) -> str:
    """The report's provenance section: one line of settings per run, then a table of its models (what the run
    folders recorded, shown as written: `core.untrusted`)."""
    parts = ["## Provenance", ""]
    for p in runs:
        v = {key: markdown_text(_fmt(p[key])) for key in _SETTINGS}
        parts.append(f"- **{markdown_text(p['run'])}**: K={v['k']}, seed={v['seed']}, repeats={v['repeats']}, "
                     f"prompt mode {v['prompt_mode']}, limit {v['limit']}; started {v['date']}; "
                     f"facet_probe {v['facet_probe']}, git commit {v['git_commit']}")
        parts += [f"  - data: {markdown_text(skipped_line(dataset, skipped))}, no item can hold them"
                  for dataset, skipped in (p.get("skipped_rows") or {}).items()]
    rows = [{"run": p["run"], "model": name, "id": _fmt(m.get("model_id") or m.get("policy")),
             "revision / weights": _fmt(m.get("revision") or m.get("weights") or m.get("commit")),
             "settings sent": _fmt(m.get("settings_sent")), "sampling": m.get("sampling", "-"),
             "tokens (in / out)": f"{m.get('prompt_tokens', 0)} / {m.get('completion_tokens', 0)}",
             "API cost (USD)": "-" if math.isnan(m.get("cost_usd", math.nan)) else f"{m['cost_usd']:.4f}"}
            for p in runs for name, m in p["models"].items()]
    if rows:
        parts += ["", md_table(pd.DataFrame(rows))]
    from facet_probe.runners.cost.spend import spend_line  # it imports the API runners (0.15 s)

    if spent := spend_line(Path(p["folder"]) for p in runs if p.get("folder")):  # cost.json, summed per model
        parts += ["", spent]
    return "\n".join(parts)
