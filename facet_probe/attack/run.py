"""The attack run, callable without the Hydra runtime: `run_attack(cfg, out_dir=None) -> Path` (the run folder).

For each sample: the clean greedy reply (selection: correct, with a rationale under CoT), PGD with the
attack's objective (attack.pgd, attack.objectives), the final reply, images and a results row; then the
run's summary and the paper-layout table of its budget folder (attack.tables). `python -m facet_probe.attack`
is the Hydra shell over it (see docs/attacks.md); `cfg` is the composed `attack_app` config.
"""

from __future__ import annotations

import logging
import random
import time
from pathlib import Path
from typing import Any, cast

import torch
from hydra.utils import get_class, instantiate
from omegaconf import DictConfig, OmegaConf
from tqdm.auto import tqdm

from facet_probe.attack.batching import ModelOps
from facet_probe.attack.config import (
    AttackAppConfig,
    AttackSettings,
    budget_label,
    register,
    settings_hash,
)
from facet_probe.attack.grid import column_meta
from facet_probe.attack.objectives import Sample
from facet_probe.attack.outputs import (
    RESULTS,
    SETTINGS,
    STATUS,
    AttackStatus,
    ResultsFile,
    attacked_row,
    base_row,
    check_settings,
    sample_ids,
    save_images,
)
from facet_probe.attack.pgd import Timings, run_pgd
from facet_probe.attack.preset import (
    PromptPreset,
    Selection,
    reference_answer_prefix,
    reference_prompt,
    selected,
)
from facet_probe.attack.selection import select
from facet_probe.attack.tables import summary_line, write_group_table, write_run_tables
from facet_probe.config.schema import check_seeds
from facet_probe.core.errors import ConfigError, parse_enum
from facet_probe.core.items import AnswerType, Item
from facet_probe.core.prompts import PromptMode
from facet_probe.core.redact import redact_config
from facet_probe.datasets.configs import dataset_config
from facet_probe.facets.option_order import OptionOrder
from facet_probe.facets.prompts import COT_ANSWER_PREFIX
from facet_probe.runners.base import RunnerError, WhiteBox, missing_methods
from facet_probe.runners.hf.oom import BatchLimit, run_halving
from facet_probe.store.atomic import atomic_write_text
from facet_probe.store.out_folder import claim

log = logging.getLogger("facet_probe.attack")
#: What Hydra writes into the run folder before the attack runs (conf/attack_app.yaml: its config, the job's log)
HYDRA_RUN_FILES = (".hydra", "attack.log")
register()

_RUNNERS: dict[str, Any] = {}  # one loaded model kept across the jobs of a multirun


def model_node(cfg: DictConfig) -> DictConfig:
    """The model config, checked for what attacks need: white-box pixel gradients and the family's own
    conditions (`HFRunner.attack_config_errors`: e.g. one InternVL tile, Qwen's thinking off)."""
    node = cast(DictConfig, OmegaConf.merge(cfg.model, {}))  # a private copy
    target = node.get("_target_")
    if not target:
        raise ConfigError("model: the config has no _target_")
    cls: Any = get_class(target)  # the class the config names, checked below
    if missing_methods(cls, WhiteBox):
        raise ConfigError(f"model {node.get('name')}: {target} is not a local HuggingFace model; attacks need "
                          "white-box pixel gradients (a model config whose _target_ is a runners.hf adapter)")
    if errors := cls.attack_config_errors(node):
        raise ConfigError(f"model {node.get('name')}: attacks cannot run with this config: {'; '.join(errors)}")
    return node


def runner_for(node: DictConfig):
    """The runner of `node`, not loaded yet; one at a time, kept across the runs of a sweep."""
    key = OmegaConf.to_yaml(node, resolve=True)
    if key not in _RUNNERS:
        for old in _RUNNERS.values():
            old.close()
        _RUNNERS.clear()
        _RUNNERS[key] = instantiate(node, _convert_="all")
    return _RUNNERS[key]


def load_runner(node: DictConfig):
    runner = runner_for(node)
    runner.check_ready()
    return runner


def load_items(cfg: DictConfig, selection: Selection = Selection.PROJECT) -> list[Item]:
    """The dataset's first `limit` items (after the selection's exclusions), all multiple choice."""
    name = cfg.dataset.name
    # the audit's lookup (data_root, no panel experiment here), on a view of the keys it reads
    view = OmegaConf.create({"dataset": cfg.dataset, "data_root": cfg.data_root, "experiment": {}})
    loader = instantiate(dataset_config(view, name, name))
    if selection == Selection.PROJECT:
        items = loader.load(limit=cfg.limit)
    else:  # exclusions first, then the limit (as the reference counts its samples)
        items = selected(loader.load(), selection)[:cfg.limit]
    for item in items:
        if item.answer_type != AnswerType.MCQ:
            raise ConfigError(f"dataset {name}: attacks need multiple-choice items; {item.item_id} is "
                              f"{item.answer_type}")
    return items


def build_samples(items: list[Item], mode: PromptMode, settings: AttackSettings, seed: int,
                  preset: PromptPreset = PromptPreset.PROJECT) -> list[Sample]:
    """Each item rendered with its options in source order (the project's or the reference's prompt, whose
    ImageNet items are answered "The class of the image is (X)."), and its gold (and targeted) letter."""
    facet = OptionOrder()
    ids = sample_ids([it.item_id for it in items])
    out = []
    for item in items:
        reference = preset == PromptPreset.REFERENCE
        prompt = reference_prompt(item, mode) if reference else facet.render(item, list(range(len(item.choices))), mode)
        prefix = reference_answer_prefix(item) if reference else COT_ANSWER_PREFIX
        gold = prompt.labels[item.gold_choice]
        target = None
        if settings.targeted == "next":
            target = prompt.labels[(item.gold_choice + 1) % len(prompt.labels)]
        elif settings.targeted == "random":
            target = random.Random(f"{seed}:{item.item_id}").choice([lab for lab in prompt.labels if lab != gold])
        out.append(Sample(ids[item.item_id], item.item_id, prompt, prompt.labels, gold, target, tuple(item.choices),
                          item.question, prefix))
    return out


def run_meta(cfg: DictConfig, settings: AttackSettings, mode: PromptMode) -> dict[str, Any]:
    return {"model": cfg.model.name, "dataset": cfg.dataset.name, "attack": settings.name, "mode": str(mode),
            "eps": settings.eps, "alpha": settings.alpha, "eps_255": budget_label(settings.eps),
            "alpha_255": budget_label(settings.alpha), "steps": settings.steps,
            "update_every": settings.update_every, "seed": int(cfg.seed), "targeted": settings.targeted,
            "quantize": settings.quantize, "early_stop": settings.early_stop}


def run_attack(cfg: DictConfig | dict, out_dir: str | Path | None = None) -> Path:
    """Attack every not-yet-done sample of the run in `out_dir` (default: `<out_root>/attack/<run_name>`, where
    the Hydra app writes it), then write its tables; the run folder. Needs no Hydra runtime."""
    register()
    cfg = cfg if isinstance(cfg, DictConfig) else OmegaConf.create(cfg)
    check_seeds(cfg, {"seed": AttackAppConfig.seed})  # before any folder, model or item
    run_dir = Path(out_dir) if out_dir is not None else Path(cfg.out_root) / "attack" / cfg.run_name
    settings = AttackSettings.from_config(cfg.attack)
    mode = PromptMode.of(cfg.prompt.cot)
    claim(run_dir, "the attack", [SETTINGS, STATUS], setting="out_root", ignore=HYDRA_RUN_FILES)  # never a user's
    meta = run_meta(cfg, settings, mode)
    if settings.needs_rationale and mode != PromptMode.COT:
        msg = f"the {settings.name} attack needs a rationale, i.e. prompt.cot=true; nothing to do"
        log.warning("%s", msg)
        AttackStatus(run_dir, meta).write("skipped", reason=msg)
        return run_dir
    node = model_node(cfg)
    max_new = cfg.max_new_tokens
    # every attack setting, the objective's whole settings object included (its _target_, weights, a new
    # setting of a plug-in), so that a changed one never resumes
    recorded = {**meta, **{k: v for k, v in settings.as_dict().items() if k != "name"},
                "model_config": OmegaConf.to_container(node, resolve=True),
                "dataset_config": OmegaConf.to_container(cfg.dataset, resolve=True), "max_new_tokens": max_new}
    # the same weights and data may live elsewhere on another machine: the weights are named by their
    # commit or the digest of their files, so that retrained weights at the same path never resume old results
    recorded["model_config"].pop("local_path", None)
    recorded["weights"] = runner_for(node).weights_id()
    recorded["dataset_config"].pop("path", None)
    preset = parse_enum(PromptPreset, cfg.prompt.preset, "prompt.preset")
    selection = parse_enum(Selection, cfg.selection, "selection")
    # recorded when not the default, so that runs made before these switches existed still resume
    recorded |= {k: v.value for k, v in (("prompt_preset", preset), ("selection", selection)) if v.value != "project"}
    check_settings(run_dir, recorded)
    atomic_write_text(run_dir / "config.yaml", OmegaConf.to_yaml(redact_config(cfg)))  # resolved, no secrets
    digest = settings_hash(recorded)
    status = AttackStatus(run_dir, meta)

    items = load_items(cfg, selection)
    samples = build_samples(items, mode, settings, int(cfg.seed), preset)
    results = ResultsFile(run_dir / RESULTS)
    todo = [s for s in samples if not results.done(s.sample_id)]
    status.write("running", samples=len(samples), already_done=len(samples) - len(todo))
    log.info("%d samples (%d already done) in %s", len(samples), len(samples) - len(todo), run_dir)

    runner = load_runner(node) if todo else None
    if runner is not None:
        status.data["model"] = runner.provenance
        max_new = int(max_new or runner.effective_generation()["max_new_tokens"])
        ops = ModelOps(runner, int(cfg.batch_size))
        objective = settings.objective
        timings = Timings()
        limit = BatchLimit(ops.batch_size)

        def attack(chunk: list[Sample]) -> dict[str, dict]:  # out of memory: halved and redone (same starts)
            ops.batch_size = limit.size
            return attack_chunk(runner, ops, chunk, objective, settings, mode, max_new, cfg, digest, timings,
                                run_dir / "images")

        def alone(chunk: list[Sample], exc: BaseException) -> dict[str, dict]:
            raise RunnerError(f"{cfg.model.name}: out of memory attacking one sample; lower the model's "
                              "resolution or use a larger GPU") from exc

        # closed however the loop ends (Ctrl-C included), so that the app's last line starts a line of its own
        with tqdm(total=len(samples), initial=len(samples) - len(todo), desc=f"{cfg.model.name} {settings.name}",
                  unit="sample", dynamic_ncols=True, smoothing=0.1, disable=not cfg.progress) as bar:
            for chunk, rows in run_halving(todo, limit, attack, alone=alone, label=cfg.model.name):
                for s in chunk:
                    results.append(rows[s.sample_id])
                done = len(results.rows)
                attacked = sum(r.get("attacked", False) for r in results.rows.values())
                succeeded = sum(r.get("success", False) for r in results.rows.values())
                bar.set_postfix(attacked=attacked, succeeded=succeeded, refresh=False)
                bar.update(len(chunk))
                log.debug("%d/%d samples done (%d attacked so far, %d succeeded)", done, len(samples), attacked,
                          succeeded)
                status.write("running", done=done, batch_size=limit.size, timings=vars(timings),
                             generate_calls=ops.generate_calls, forward_calls=ops.forward_calls)

    ordered = [results.rows[s.sample_id] for s in samples if s.sample_id in results.rows]
    summary = write_run_tables(run_dir, ordered, {**meta, **column_meta(settings.objective, settings.loop)})
    table = write_group_table(run_dir.parent)
    status.write("done", done=len(ordered), summary={k: v for k, v in summary.items() if k not in meta},
                 table=str(table) if table else None)
    log.info("%s", summary_line(summary))
    return run_dir


def attack_chunk(runner, ops: ModelOps, chunk: list[Sample], objective, settings: AttackSettings, mode: PromptMode,
                 max_new: int, cfg: DictConfig, digest: str, timings: Timings, images_dir: Path) -> dict[str, dict]:
    """Clean replies, selection and (for the selected samples) the attack of one batch; a row per sample."""
    t0 = time.perf_counter()
    encs = [runner.encode(s.prompt) for s in chunk]
    with torch.no_grad():
        pixels = [runner.pixel_inputs(e.images01) if e.images01 else {} for e in encs]
    replies = ops.generate(encs, pixels, max_new)
    rows: dict[str, dict] = {}
    picked = []
    for s, enc, reply in zip(chunk, encs, replies, strict=True):
        reading = s.read(reply)
        sel = select(reading, mode, has_image=bool(enc.images01))
        rows[s.sample_id] = base_row(s, dataset=cfg.dataset.name, model=cfg.model.name, attack=settings.name,
                                     clean=reading, selection=sel, settings_digest=digest)
        if sel.selected and objective is not None:
            picked.append((s, reading, enc))
    if picked:
        outcome = run_pgd(runner, [s for s, _, _ in picked], [r.text for _, r, _ in picked], objective, settings,
                          ops=ops, max_new_tokens=max_new, seed=int(cfg.seed), timings=timings,
                          encodeds=[e for _, _, e in picked])
        seconds = (time.perf_counter() - t0) / len(picked)
        for (s, reading, _), res in zip(picked, outcome, strict=True):
            images = save_images(images_dir, res) if cfg.save_images and res.error is None else None
            rows[s.sample_id] = attacked_row(rows[s.sample_id], res, reading, images, seconds)
    return rows
