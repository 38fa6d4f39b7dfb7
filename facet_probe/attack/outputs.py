"""The attack run folder: per-sample results (the unit of resume), images, settings and status.

```
<run folder>/
  config.yaml            resolved config
  attack_settings.json   what changes a sample's result; a resumed run must match it
  results.jsonl          one row per finished sample (append-only; a torn last line is dropped on resume)
  images/<sample>_clean.png, images/<sample>_adv.png   lossless, at the model's resolution
                         (<sample>_img<k>_clean.png ... when a sample has several images)
  summary.json, summary.csv, samples.csv, loss_curves.csv, loss_curves.png   (attack.tables)
  run_status.json        state, counts, timings, versions, git commit, model provenance
```
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from facet_probe.attack.criteria import Reading, rationale_changed
from facet_probe.attack.pgd import PGDResult
from facet_probe.attack.pixels import save_png
from facet_probe.attack.selection import Selection
from facet_probe.core.errors import ConfigError
from facet_probe.store.atomic import atomic_write_text
from facet_probe.store.jsonl import append_record, iter_records, repair_torn_tail
from facet_probe.store.run_folder import STATUS_FILE, RunFolder
from facet_probe.store.run_status import git_commit, library_versions, previous_sessions

log = logging.getLogger("facet_probe.attack")

RESULTS = "results.jsonl"
SETTINGS = "attack_settings.json"
STATUS = STATUS_FILE  # read back by the explorer as `store.run_folder.RunStatus`
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def sample_ids(item_ids: list[str]) -> dict[str, str]:
    """File-name-safe, unique sample ids for item ids (``scienceqa::test-12`` -> ``scienceqa__test-12``)."""
    out: dict[str, str] = {}
    used: set[str] = set()
    for item_id in item_ids:
        sid = _UNSAFE.sub("_", item_id.replace("::", "__")).strip("._") or "sample"
        if sid in used:
            sid += "-" + hashlib.sha256(item_id.encode()).hexdigest()[:8]
        used.add(sid)
        out[item_id] = sid
    return out


class ResultsFile:
    """`results.jsonl`: one JSON row per finished sample; re-running skips the samples it holds."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.rows: dict[str, dict] = {}
        repair_torn_tail(path)  # a write cut short by a kill: cut off (kept in .torn), the sample is redone
        if path.exists():
            try:
                for row in iter_records(path):
                    self.rows[row["sample_id"]] = row
            except ValueError as exc:
                raise ConfigError(f"{exc}; the file is damaged (remove the line to redo that sample)") from None

    def done(self, sample_id: str) -> bool:
        return sample_id in self.rows

    def append(self, row: dict) -> None:
        append_record(self.path, row)
        self.rows[row["sample_id"]] = row


#: The objective weights that settings records kept as top-level keys before objectives were plug-ins.
LEGACY_OBJECTIVE_KEYS = ("answer_weight", "kl_weight", "template_weight", "sequence")


def _with_added_nulls(before: dict[str, Any], now: dict[str, Any]) -> dict[str, Any]:
    """`before` with every key `now` has and `before` lacks set to null, nested dicts included: a setting added
    since a record was written is recorded with null, which means the behaviour from before it existed."""
    out = dict(before)
    for key, value in now.items():
        if key not in out and value is None:
            out[key] = None
        elif isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _with_added_nulls(out[key], value)
    return out


def in_current_form(before: dict[str, Any], now: dict[str, Any]) -> dict[str, Any]:
    """A settings record written by an older version, read in today's form so that the same settings still
    resume: the objective weights it kept as top-level keys become the objective's own settings (its
    `_target_` is the one the same attack name builds today), and settings added since are null."""
    before = dict(before)
    if "objective" not in before and "objective" in now:
        legacy = {k: before.pop(k) for k in LEGACY_OBJECTIVE_KEYS if k in before}
        objective = now["objective"]
        before["objective"] = None if objective is None else {
            "_target_": objective.get("_target_"), **{k: legacy[k] for k in objective if k in legacy}}
    return _with_added_nulls(before, now)


def check_settings(run_dir: Path, settings: dict[str, Any]) -> None:
    """Record the run's settings, or check that a resumed run uses the same ones (a record an older version
    wrote is read in today's form: `in_current_form`)."""
    path = run_dir / SETTINGS
    if path.exists():
        now = json.loads(json.dumps(settings, default=str))
        before = in_current_form(json.loads(path.read_text()), now)
        if before != now:
            diff = sorted(k for k in set(before) | set(now) if before.get(k) != now.get(k))
            raise ConfigError(f"{run_dir} holds results made with other settings ({', '.join(diff)} differ); "
                              "choose another out_root or remove the folder")
        return
    atomic_write_text(path, json.dumps(settings, indent=2, sort_keys=True, default=str) + "\n")


def image_names(sample_id: str, n_images: int) -> list[tuple[str, str]]:
    """(clean, adv) file names of a sample's images."""
    if n_images == 1:
        return [(f"{sample_id}_clean.png", f"{sample_id}_adv.png")]
    return [(f"{sample_id}_img{k}_clean.png", f"{sample_id}_img{k}_adv.png") for k in range(n_images)]


def save_images(folder: Path, result: PGDResult) -> dict[str, list[str]]:
    names = image_names(result.sample.sample_id, len(result.clean_images))
    for (clean_name, adv_name), clean, adv in zip(names, result.clean_images, result.adv_images, strict=True):
        save_png(clean, folder / clean_name)
        save_png(adv, folder / adv_name)
    return {"clean": [f"images/{c}" for c, _ in names], "adv": [f"images/{a}" for _, a in names]}


def base_row(sample, *, dataset: str, model: str, attack: str, clean: Reading, selection: Selection,
             settings_digest: str) -> dict[str, Any]:
    return {"sample_id": sample.sample_id, "item_id": sample.item_id, "dataset": dataset, "model": model,
            "attack": attack, "mode": str(sample.mode), "labels": list(sample.labels),
            "question": sample.question, "options": list(sample.options), "gold": sample.gold,
            "target": sample.target, "prompt_hash": sample.prompt.hash,
            "image_sha256": [ref.sha256 for ref in sample.prompt.images()],
            "selected": selection.selected, "selection_reason": selection.reason, "attacked": False,
            **clean.to_json("clean"), "success": False, "settings_hash": settings_digest}


def attacked_row(row: dict[str, Any], result: PGDResult, clean: Reading, images: dict[str, list[str]] | None,
                 seconds: float) -> dict[str, Any]:
    if result.error is not None:
        return {**row, "error": result.error}
    adv = result.final
    assert adv is not None, "a run without an error has its final reading"
    return {**row, "attacked": True, **adv.to_json("adv"), "success": result.success,
            "rationale_changed": rationale_changed(clean, adv), "hit_target": (
                adv.answer == row["target"] if row["target"] else None),
            "reference_success": result.reference_success,
            "linf": result.linf, "linf_255": round(result.linf * 255, 4), "steps_run": result.steps_run,
            "updates": result.updates, "refreshes": result.refreshes, "stopped_early": result.stopped_early,
            "curve": {k: [round(v, 6) for v in vals] for k, vals in result.curve.items()},
            "pseudo_targets": [{"step": s, "reply": t} for s, t in result.pseudo_targets],
            "images": images, "seconds": round(seconds, 3)}


class AttackStatus:
    """`run_status.json`, rewritten atomically after every batch."""

    def __init__(self, run_dir: Path, settings: dict[str, Any]) -> None:
        self.path = RunFolder(run_dir).status_file
        self.started = time.perf_counter()
        self.data: dict[str, Any] = {
            "state": "running", "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
            "previous_sessions": previous_sessions(RunFolder(run_dir)),
            "versions": library_versions(), "git_commit": git_commit(), "settings": settings}

    def write(self, state: str, **extra: Any) -> None:
        self.data.update(extra)
        self.data["state"] = state
        self.data["elapsed_s"] = round(time.perf_counter() - self.started, 3)
        atomic_write_text(self.path, json.dumps(self.data, indent=2, default=str) + "\n")
