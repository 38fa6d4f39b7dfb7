"""Train the tiny VLM on the synthetic sets' train splits and save it as a `save_pretrained` folder.

``python -m facet_probe_dev.tiny_vlm.train [--out DIR] [--curriculum FILE] ...`` (``make tiny-vlm``): CPU
only, seeded (the same machine, process and thread counts reproduce the same weights). Training follows
a curriculum (`curriculum.py`, default `curricula/default.yaml`): stages in order, each with its own
data and learning rate, because the order the skills are learnt in decides whether they are learnt at
all (docs/tiny_vlm.md). A stage trains either

- the synthetic tasks (`data.py`): train-split items of the chosen sets (and the echo task, `echo.py`),
  rendered by the real facet renderers under uniformly random orderings, direct and chain-of-thought,
  loss on the replies only; or
- the content-free copy patterns of `pretrain.py` (induction, labelled lookup, captions of pictures).

By default the work is split over two processes (one per core, gradients averaged every step), which
halves the wall time on two cores. Each process renders its share of the examples; the
batches, and each step's mean loss over their replies, do not depend on the number of processes. It
writes the model, the processor (tokenizer, chat template, image processor), `training_log.json` and
`MODEL_CARD.md` (accuracy per synthetic dataset, direct and chain-of-thought, measured on the saved
weights through the LLaVA runner).
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import os
import platform
import random
import resource
import shutil
import signal
import sys
import time
from collections import defaultdict, deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path

import torch
import torch.distributed as dist
from torch import Tensor
from transformers import LlavaForConditionalGeneration, LlavaProcessor

from facet_probe.core.prompts import PromptMode
from facet_probe_dev.tiny_vlm import echo
from facet_probe_dev.tiny_vlm.architecture import (
    TinyVLMSpec,
    build_model,
    build_processor,
    count_parameters,
    logits_at,
)
from facet_probe_dev.tiny_vlm.curriculum import DEFAULT_CURRICULUM, Stage, check, load
from facet_probe_dev.tiny_vlm.data import (
    AUXILIARY_TASKS,
    IGNORE_INDEX,
    Packed,
    Pool,
    available_sets,
    collate_packed,
    encode_packed,
    generator_version,
    spec_stream,
    tokenizer_corpus,
)
from facet_probe_dev.tiny_vlm.evaluate import build_cases, evaluate, format_table
from facet_probe_dev.tiny_vlm.optim import OPTIMIZERS, build_optimizer
from facet_probe_dev.tiny_vlm.pretrain import CopyTasks, copy_loss
from facet_probe_dev.tiny_vlm.tokenizer import option_markers, prompt_phrases, train_tokenizer


@dataclass
class TrainConfig:
    seed: int = 0
    procs: int = 2  # training processes (one per core); the batch is split between them
    threads: int = 1  # torch threads per process
    #: the stages, in order (curriculum.py); `stages` (if given) replaces the file
    curriculum: str = str(DEFAULT_CURRICULUM)
    stages: list[Stage] = field(default_factory=list)
    pretrain_batch: int = 64  # rows per copy-pattern step (all processes together)
    lookup_max_gap: int = 0  # lookup queries: tokens between the mention and the label (pretrain.py)
    lookup_max_fillers: int = 0  # lookup queries: unlisted words around the mention
    #: rows of the copy patterns added to every task step (induction and captions; 0: none)
    side_batch: int = 0
    side_caption_share: float = 0.5
    side_weight: float = 0.5
    batch_size: int = 32  # packed examples per step (all processes together)
    max_branches: int = 6  # questions trained per rendered context (shared prefix, see data.py)
    min_lr_ratio: float = 0.1
    warmup: int = 50
    weight_decay: float = 0.01
    #: "muon" on the layers' weight matrices (optim.py), or "adamw" (every run before session 9): on Muon
    #: each transition comes in a fraction of AdamW's steps, and whatever the float path (docs/tiny_vlm.md)
    optimizer: str = "muon"
    grad_clip: float = 1.0
    p_cot: float = 0.5
    n_per_set: int = 3000  # train items loaded per set
    vocab_size: int = 1024
    option_marker_tokens: bool = True  # "\nA." etc. one token each (tokenizer.option_markers)
    bucket: int = 8  # batches drawn at once and grouped by length (less padding)
    eval_n: int = 12  # test items per set in a stage's quick evaluation (items 200.. of the test split)
    eval_offset: int = 200
    budget_s: float = 0.0  # if > 0: stop training when this much wall time has passed (not reproducible)
    autocast_bf16: bool = False  # measured slower than fp32 for this size on CPU
    #: only the supervised positions through the vocabulary projection, and the language model compiled
    #: (`compile_language_model`; eager where it cannot): 1.2-1.5x per step. The same losses with other
    #: float rounding: on AdamW the curriculum's dialog stage did not learn on it in 8 attempts
    #: (docs/tiny_vlm.md, N1, N2), on Muon every stage did (f1). Every stage on it (a curriculum can put
    #: single stages on it, `Stage.fast`)
    fast: bool = True
    #: start from this saved folder's weights and tokenizer instead of a fresh model (experiments on
    #: later stages; save it in float32 with FP_TINY_VLM_DTYPE=float32)
    init: str = ""
    #: if set: the model after each stage, in float32, in DIR/<n>-<stage> (a later run can `--init` from it)
    stage_checkpoints: str = ""
    spec: TinyVLMSpec = field(default_factory=TinyVLMSpec)

    def resolved_stages(self) -> list[Stage]:
        """`stages`, or those of the `curriculum` file; checked against the sets there are."""
        known = [*available_sets(), *AUXILIARY_TASKS]
        if self.stages:
            return check(self.stages, known, "TrainConfig.stages")
        return load(self.curriculum, known)


def lr_at(step: int, total: int, cfg: TrainConfig, peak: float, decay: bool = True) -> float:
    """Linear warm-up over `cfg.warmup` steps, then (if `decay`) cosine from `peak` to
    `cfg.min_lr_ratio` x `peak` at `total`."""
    if step < cfg.warmup:
        return peak * (step + 1) / cfg.warmup
    if not decay:
        return peak
    progress = min(1.0, (step - cfg.warmup) / max(1, total - cfg.warmup))
    return peak * (cfg.min_lr_ratio + (1 - cfg.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * progress)))


def length_batches(lengths: Sequence[int], size: int, rng: random.Random) -> list[list[int]]:
    """A chunk's example indices sorted by length (stable), cut into batches of `size`, in shuffled order
    (less padding, no length order across steps)."""
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    groups = [order[i: i + size] for i in range(0, len(order), size)]
    rng.shuffle(groups)
    return groups


def reply_loss(model, batch: dict[str, torch.Tensor],
               replies_only: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """Cross-entropy on the reply tokens, averaged within each reply (branch), then over all replies
    of the batch (a short direct reply weighs as much as a long chain-of-thought one); and the predicted
    token at each reply position (-1 elsewhere). `replies_only`: only the reply positions (about a sixth
    of the tokens) go through the vocabulary projection (`logits_at`); else every position, the float
    path the shipped weights were trained on (`TrainConfig.fast`)."""
    inputs = {k: v for k, v in batch.items() if k not in ("targets", "segments")}
    targets, segments = batch["targets"], batch["segments"]
    keep = segments >= 0  # exactly the reply targets (collate_packed)
    if replies_only:
        logits = logits_at(model, inputs, keep)
        tok_loss = torch.nn.functional.cross_entropy(logits, targets[keep], reduction="none")
    else:
        full = model(**inputs, use_cache=False).logits.float()
        tok_loss = torch.nn.functional.cross_entropy(full.transpose(1, 2), targets, ignore_index=IGNORE_INDEX,
                                                     reduction="none")[keep]
        logits = full[keep]
    n_seg = int(segments.max()) + 1
    key = (torch.arange(segments.shape[0]).unsqueeze(1) * n_seg + segments)[keep]
    sums = torch.zeros(segments.shape[0] * n_seg).index_add_(0, key, tok_loss)
    counts = torch.zeros(segments.shape[0] * n_seg).index_add_(0, key, torch.ones_like(tok_loss))
    used = counts > 0
    predicted = torch.full_like(targets, -1)
    predicted[keep] = logits.detach().argmax(-1)
    return (sums[used] / counts[used]).mean(), predicted


class AnswerTracker:
    """Teacher-forced accuracy of the answer token (the one after ``Answer:`` / ``The answer is (``),
    per (set, mode), over the last `window` replies of the training stream: a cheap learning curve."""

    def __init__(self, tokenizer, window: int = 300) -> None:
        self.marks = {tokenizer.convert_tokens_to_ids(t) for t in (":", "Ġ(")} - {None}
        self.hits: dict[tuple[str, str], deque] = defaultdict(lambda: deque(maxlen=window))

    def update(self, examples: Sequence[Packed], predicted: torch.Tensor) -> None:
        """`predicted`: the token predicted at each position of the batch (`reply_loss`)."""
        for r, e in enumerate(examples):
            start = len(e.prefix_ids)
            for b in e.branches:
                reply = [i for i, lab in enumerate(b.labels) if lab != IGNORE_INDEX]
                marks = [i for i in reply[:-1] if b.input_ids[i] in self.marks]
                if marks:
                    i = marks[-1] + 1
                    hit = int(predicted[r, start + i - 1]) == b.input_ids[i]
                    mode = f"{b.mode}_first" if b.answer_first else b.mode
                    self.hits[(e.dataset.removeprefix("synthetic_"), mode)].append(hit)
                start += len(b.input_ids)

    def summary(self) -> dict[str, float]:
        return {f"{k[0]}/{k[1]}": round(sum(v) / len(v), 2) for k, v in sorted(self.hits.items()) if v}

    def level(self, sets: Iterable[str]) -> float:
        """The weakest answer accuracy over `sets` and modes (0 for a set not yet seen)."""
        summary = self.summary()
        lows = [min((v for k, v in summary.items() if k.split("/")[0] == name), default=0.0)
                for name in (s.removeprefix("synthetic_") for s in sets)]
        return min(lows, default=0.0)

    def reached(self, sets: Iterable[str], level: float) -> bool:
        """Whether every one of `sets` has been seen and its answers (each mode) are at least `level`."""
        return self.level(sets) >= level

    def line(self) -> str:
        """The summary as one log line."""
        return "teacher-forced answer accuracy: " + "  ".join(f"{k} {v:.2f}" for k, v in self.summary().items())


def held_out_patterns(tasks: CopyTasks, size: int = 48) -> dict[str, dict[str, torch.Tensor]]:
    """One fixed batch of each warm-up pattern, to follow what the warm-up has taught."""
    return {"induction": tasks.batch(size, 0.0, 0.0), "lookup": tasks.batch(size, 1.0, 0.0),
            "caption": tasks.batch(size, 0.0, 1.0)}


@torch.no_grad()
def warm_up_accuracy(model, held_out: dict[str, dict[str, torch.Tensor]],
                     supervised_only: bool = True) -> dict[str, float]:
    was_training = model.training
    model.eval()
    out = {name: round(copy_loss(model, batch, supervised_only)[1], 3) for name, batch in held_out.items()}
    model.train(was_training)
    return out


def shrink_and_perturb(model: torch.nn.Module, fresh: torch.nn.Module, shrink: float, perturb: float) -> int:
    """theta <- shrink * theta + perturb * theta_fresh on the language model's layer matrices (not the
    embeddings, norms or vision tower); returns how many tensors changed."""
    fresh_params = dict(fresh.named_parameters())
    changed = 0
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "language_model.layers." in name and p.ndim >= 2:
                p.mul_(shrink).add_(fresh_params[name], alpha=perturb)
                changed += 1
    return changed


def run_attempts(retries: int, attempt: Callable[[int], dict], snapshot: Callable[[], object],
                 restore: Callable[[object], None]) -> dict:
    """Run a stage's `attempt` (a result with `stopped_by` and `level`, its weakest skill's accuracy) at
    most `retries` + 1 times, each from the stage's start, until one reaches its `until` (or the budget
    is spent); an attempt that runs out of steps or gives up (`give_up_at`) is retried. If none gets
    there, the best is kept, not the last: a gradual skill's better attempt is worth more than a fresh
    start (docs/tiny_vlm.md, K4)."""
    start = snapshot() if retries else None
    levels: list[float] = []
    best = None  # the best attempt so far: (level, number, its state unless it is the last, result)
    for number in range(retries + 1):
        if number:
            restore(start)
        result = attempt(number)
        levels.append(result["level"])
        if result["stopped_by"] in ("until", "budget"):
            return {**result, "attempts": number + 1, "attempt_levels": levels, "kept_attempt": number}
        if best is None or result["level"] > best[0]:
            best = (result["level"], number, snapshot() if number < retries else None, result)
    if best[1] != retries:
        restore(best[2])
    return {**best[3], "attempts": retries + 1, "attempt_levels": levels, "kept_attempt": best[1]}


def snapshot_training(model: torch.nn.Module, opt: torch.optim.Optimizer) -> tuple[dict, dict]:
    """A copy of the weights and the optimiser state, to start a stage's attempts from."""
    return copy.deepcopy(model.state_dict()), copy.deepcopy(opt.state_dict())


def restore_training(model: torch.nn.Module, opt: torch.optim.Optimizer, state: tuple[dict, dict]) -> None:
    """Back to `state`, which stays as it was: `Optimizer.load_state_dict` adopts the tensors it is given
    and then updates them in place, so it gets a copy (before session 7 it did not, and a stage's third
    attempt started with the second attempt's Adam moments: docs/tiny_vlm.md, F)."""
    model.load_state_dict(state[0])
    opt.load_state_dict(copy.deepcopy(state[1]))


def compile_language_model(model: LlavaForConditionalGeneration) -> str | None:
    """`torch.compile` the language model in place, checked on one small forward and backward; None if
    it compiled, else why not (the model is left eager). 1.24x per training step after ~13 s of
    compiling (`benchmarks/bench_tiny_vlm_step.py`); the vision tower and LLaVA's glue stay eager, since
    every new image count would compile them again."""
    language_model = model.model.language_model
    language_model.compile(dynamic=True)
    embeds = torch.zeros(2, 8, language_model.config.hidden_size, requires_grad=True)
    try:
        language_model(inputs_embeds=embeds, use_cache=False)[0].sum().backward()
    except Exception as err:  # noqa: BLE001 - any failure to compile means: train eager, and say why
        eager_language_model(model)
        return f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}"
    finally:
        model.zero_grad(set_to_none=True)
    return None


def eager_language_model(model: LlavaForConditionalGeneration) -> None:
    """Undo `compile_language_model`: the language model's eager forward again."""
    model.model.language_model._compiled_call_impl = None  # what `Module.compile` sets


def cpu_seconds(children: bool = False) -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN if children else resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def _average_gradients(model: torch.nn.Module, world: int) -> None:
    """All-reduce every parameter's gradient (zeros where a process's batch did not reach it, e.g. the
    vision tower on a text-only batch), averaged over the processes."""
    params = list(model.parameters())
    for p in params:
        if p.grad is None:
            p.grad = torch.zeros_like(p)
    flat = torch.cat([p.grad.reshape(-1) for p in params])
    dist.all_reduce(flat)
    flat /= world
    offset = 0
    for p in params:
        n = p.numel()
        p.grad.copy_(flat[offset: offset + n].view_as(p))
        offset += n


def _die_with_parent() -> None:
    """On Linux, ask for SIGTERM when the launching process dies, so that stopping `train` never leaves
    orphaned workers training on (prctl PR_SET_PDEATHSIG; elsewhere a no-op)."""
    if sys.platform.startswith("linux"):
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGTERM))


def _worker(rank: int, world: int, cfg: TrainConfig, out: str, port: int, result_file: str) -> None:
    if world > 1:
        _die_with_parent()
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        summary = _train(rank, world, cfg, Path(out))
        if rank == 0:
            Path(result_file).write_text(json.dumps(summary))
    finally:
        if world > 1:
            dist.destroy_process_group()


class Trainer:
    """One training process: its model, optimiser and share of the data, and the curriculum's stages.
    Every process runs the same steps; rank 0 logs, evaluates and saves."""

    def __init__(self, rank: int, world: int, cfg: TrainConfig) -> None:
        self.rank, self.world, self.cfg = rank, world, cfg
        self.log = print if rank == 0 else (lambda *a, **k: None)
        self.t_start, self.cpu_start = time.perf_counter(), cpu_seconds()
        torch.set_num_threads(cfg.threads)
        random.seed(cfg.seed)
        torch.manual_seed(cfg.seed)
        self.stages = cfg.resolved_stages()
        self.sets = available_sets()
        self.log(f"sets: {self.sets}  generator {generator_version()}  processes {world}")
        self.log("stages: " + " -> ".join(f"{st.name} ({st.steps})" for st in self.stages))

        # every set and echo (the tokenizer is the curriculum's), and any other auxiliary task a stage trains
        extra = sorted({s for st in self.stages for s in st.sets if s in AUXILIARY_TASKS and s != echo.NAME})
        self.pool = Pool.load([*self.sets, echo.NAME, *extra], cfg.n_per_set)
        phrases = prompt_phrases() + (option_markers() if cfg.option_marker_tokens else [])
        if cfg.init:
            self.tokenizer = LlavaProcessor.from_pretrained(cfg.init).tokenizer
        else:
            self.tokenizer = train_tokenizer(tokenizer_corpus(self.pool, cfg.seed), cfg.vocab_size, phrases)
        self.processor = build_processor(cfg.spec, self.tokenizer)
        self.model = build_model(cfg.spec, self.tokenizer, cfg.seed)
        if cfg.init:  # experiments: later stages from a saved model
            saved = LlavaForConditionalGeneration.from_pretrained(cfg.init, dtype=torch.float32)
            self.model.load_state_dict(saved.state_dict())
        self.n_params = count_parameters(self.model)
        self.fast = False  # the path the current stage trains on (`use_fast_path`)
        self.log(f"vocab {len(self.tokenizer)}, parameters {self.n_params:,}; "
                 f"data ready in {time.perf_counter() - self.t_start:.1f} s")

        self.opt = build_optimizer(self.model, cfg.optimizer, cfg.weight_decay, rank, world)

        self.history: list[dict] = []
        self.totals = {"task_steps": 0, "replies": 0, "tokens": 0, "answer_tokens": 0}
        self.model.train()
        shape = (cfg.spec.image_tokens, cfg.spec.image_size, cfg.lookup_max_gap, cfg.lookup_max_fillers)
        self.copy_tasks = CopyTasks(self.processor, cfg.seed * 1000 + rank, *shape)
        self.held_out = held_out_patterns(CopyTasks(self.processor, cfg.seed * 1000 + 999, *shape))
        self.quick_cases: dict = {}

    # -- agreement between the processes (they must all take the same steps) --

    def shared(self, value: float) -> float:
        """Rank 0's `value`, for every process."""
        tensor = torch.tensor([float(value)], dtype=torch.float64)
        if self.world > 1:
            dist.broadcast(tensor, 0)
        return tensor.item()

    def agreed(self, flag: bool) -> bool:
        return bool(self.shared(flag))

    def out_of_budget(self) -> bool:
        return bool(self.cfg.budget_s) and self.agreed(time.perf_counter() - self.t_start > self.cfg.budget_s)

    def use_fast_path(self, fast: bool) -> None:
        """Train on the fast path (`TrainConfig.fast`, `Stage.fast`: only the supervised positions through
        the vocabulary projection, the language model compiled) or on the default one."""
        if fast == self.fast:
            return
        if not fast:
            eager_language_model(self.model)
        elif why_not := compile_language_model(self.model):
            self.log(f"torch.compile unavailable, training eager: {why_not}")
        self.fast = fast

    # -- steps --

    def step_with(self, loss: Tensor | None, lr: float) -> None:
        """One optimiser step; `loss` None: this process had nothing this step (its gradients are zeros)."""
        for group in self.opt.param_groups:
            group["lr"] = lr
        if loss is not None:
            loss.backward()
        if self.world > 1:
            _average_gradients(self.model, self.world)
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.cfg.grad_clip)
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)

    def task_step(self, examples: list[Packed], share: float,
                  lr: float) -> tuple[Tensor | None, Tensor | None, dict | None]:
        """A step on this process's examples, their loss weighted by `share` (this process's share of the
        batch's replies): with the gradients averaged over the processes, the step is the mean over every
        reply of the batch."""
        cfg = self.cfg
        loss = task_loss = predicted = batch = None
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=cfg.autocast_bf16):
            if examples:
                batch = collate_packed(examples, self.tokenizer.pad_token_id)
                task_loss, predicted = reply_loss(self.model, batch, replies_only=self.fast)
                loss = task_loss * (self.world * share)
            if cfg.side_batch:  # generic copy and caption rows alongside the tasks (see TrainConfig)
                side = self.copy_tasks.batch(max(1, cfg.side_batch // self.world), lookup_share=0.0,
                                             caption_share=cfg.side_caption_share)
                side_loss = cfg.side_weight * copy_loss(self.model, side, self.fast)[0]
                loss = side_loss if loss is None else loss + side_loss
        self.step_with(loss, lr)
        return task_loss, predicted, batch

    def shard_batches(self, stage_weights: dict[str, float], seed: int, answer_first: dict[str, float] | None = None,
                      background: dict | None = None) -> Iterator[tuple[list[Packed], int]]:
        """This process's examples of each batch, and the batch's reply count. Every process draws the same
        example specs and renders every `world`-th one; with the lengths shared, every process cuts the
        same length-sorted batches as one process would, and trains the examples it rendered."""
        cfg, rank, world = self.cfg, self.rank, self.world
        specs = spec_stream(self.pool, stage_weights, seed, cfg.p_cot, cfg.max_branches, answer_first, background)
        rng = random.Random(seed + 1)
        chunk_size = cfg.batch_size * cfg.bucket
        while True:
            chunk = [next(specs) for _ in range(chunk_size)]
            mine = {i: encode_packed(self.processor, *chunk[i]) for i in range(rank, chunk_size, world)}
            sizes = torch.zeros(2, chunk_size, dtype=torch.long)  # tokens and replies of each example
            for i, example in mine.items():
                sizes[0, i], sizes[1, i] = len(example), len(example.branches)
            if world > 1:
                dist.all_reduce(sizes)
            for batch in length_batches(sizes[0].tolist(), cfg.batch_size, rng):
                yield [mine[i] for i in batch if i in mine], int(sizes[1, batch].sum())

    # -- stages --

    def task_stage(self, index: int, stage: Stage, attempt: int) -> dict:
        """The synthetic tasks of `stage.sets`; ends early once their answers reach `stage.until`."""
        seed = self.cfg.seed * 1000 + 100 * index if stage.data_seed is None else stage.data_seed
        stream = self.shard_batches(stage.sets, seed + 10_000 * attempt, stage.answer_first,
                                    stage.answer_first_background)
        tracker = AnswerTracker(self.tokenizer)
        t0, data_s, ema, done, stopped = time.perf_counter(), 0.0, None, 0, "steps"
        for step in range(stage.steps):
            if self.out_of_budget():
                stopped = "budget"
                break
            t_data = time.perf_counter()
            examples, batch_replies = next(stream)
            data_s += time.perf_counter() - t_data
            lr = lr_at(step, stage.steps, self.cfg, stage.lr, stage.decay)
            replies = sum(len(e.branches) for e in examples)
            loss, predicted, batch = self.task_step(examples, replies / batch_replies, lr)
            self.totals["task_steps"] += 1
            done = step + 1
            if batch is not None:
                with torch.no_grad():
                    tracker.update(examples, predicted)
                self.totals["replies"] += replies
                self.totals["tokens"] += sum(len(e) for e in examples)
                self.totals["answer_tokens"] += int((batch["targets"] != IGNORE_INDEX).sum())
                ema = loss.item() if ema is None else 0.95 * ema + 0.05 * loss.item()
            if done % 50 == 0:
                elapsed = time.perf_counter() - t0
                self.history.append({"stage": stage.name, "step": done, "loss": round(ema or 0, 4),
                                     "elapsed_s": round(elapsed, 1), "answer_accuracy": tracker.summary()})
                self.log(f"{stage.name} {done:5d}  loss {ema or 0:.4f}  lr {lr:.2e}  {elapsed:.0f} s "
                         f"(data {data_s:.0f} s)")
                self.log("   " + tracker.line())
                if stage.until and self.agreed(tracker.reached(stage.sets, stage.until)):
                    stopped = "until"
                    break
                if (stage.give_up_at and done >= stage.give_up_at
                        and self.agreed(not tracker.reached(stage.sets, stage.give_up_below))):
                    stopped = "gave up"
                    self.log(f"stage {stage.name}: below {stage.give_up_below:g} at step {done}: "
                             "giving up the attempt")
                    break
        return {"steps_done": done, "stopped_by": stopped, "answer_accuracy": tracker.summary(),
                "level": self.shared(tracker.level(stage.sets))}

    def copy_stage(self, index: int, stage: Stage, attempt: int) -> dict:
        """`pretrain.py`'s content-free patterns (loss on every target token); ends early once the
        patterns it trains reach `stage.until` on held-out rows. A new attempt draws on in the same stream."""
        cfg, rank = self.cfg, self.rank
        kinds = stage.trained_patterns()
        t0, done, stopped, accuracy = time.perf_counter(), 0, "steps", None
        for step in range(stage.steps):
            if self.out_of_budget():
                stopped = "budget"
                break
            batch = self.copy_tasks.batch(cfg.pretrain_batch // self.world, lookup_share=stage.share("lookup"),
                                          caption_share=stage.share("caption"))
            loss, _ = copy_loss(self.model, batch, self.fast)
            self.step_with(loss, lr_at(step, stage.steps, cfg, stage.lr, stage.decay))
            done = step + 1
            if done % 50 == 0:
                accuracy = warm_up_accuracy(self.model, self.held_out, self.fast) if rank == 0 else {}
                self.history.append({"stage": stage.name, "step": done, "loss": round(loss.item(), 4),
                                     "accuracy": accuracy})
                scores = "  ".join(f"{k} {v:.2f}" for k, v in accuracy.items())
                self.log(f"{stage.name} {done:5d}  loss {loss.item():.3f}  accuracy {scores}  "
                         f"{time.perf_counter() - t0:.0f} s")
                if stage.until and self.agreed(rank == 0 and all(accuracy[k] >= stage.until for k in kinds)):
                    stopped = "until"
                    break
        if accuracy is None or done % 50:  # else the check at the last step measured this model
            accuracy = warm_up_accuracy(self.model, self.held_out, self.fast) if rank == 0 else {}
        return {"steps_done": done, "stopped_by": stopped, "accuracy": accuracy,
                "level": self.shared(min((accuracy[k] for k in kinds), default=0.0) if rank == 0 else 0.0)}

    def attempt(self, index: int, stage: Stage, number: int) -> dict:
        """One attempt at `stage` (the `number`-th, from 0), from wherever the weights are now."""
        if number:
            self.log(f"stage {stage.name}: {stage.until:g} not reached; "
                     f"attempt {number + 1} of {stage.retries + 1} from the stage's start, with new data")
        if stage.fresh_optimizer:
            self.opt.reset_state()
        if stage.shrink != 1.0 or stage.perturb:
            with torch.random.fork_rng():  # the same on every process; the training's generator untouched
                fresh = build_model(self.cfg.spec, self.tokenizer, self.cfg.seed * 1000 + 10 * index + number)
            changed = shrink_and_perturb(self.model, fresh, stage.shrink, stage.perturb)
            self.opt.reset_state()
            self.log(f"stage {stage.name}: shrink {stage.shrink:g}, perturb {stage.perturb:g} ({changed} tensors)")
        return (self.copy_stage if stage.is_copy else self.task_stage)(index, stage, number)

    def run_stage(self, index: int, stage: Stage) -> dict:
        """`stage`'s attempts, then its quick evaluation and checkpoint (if asked): its entry of the log."""
        cfg, model = self.cfg, self.model
        t_stage = time.perf_counter()
        self.use_fast_path(cfg.fast or stage.fast)
        result = run_attempts(stage.retries, partial(self.attempt, index, stage),
                              partial(snapshot_training, model, self.opt),
                              partial(restore_training, model, self.opt))
        if result["attempts"] > 1:
            self.log(f"stage {stage.name}: attempt levels {result['attempt_levels']}, "
                     f"kept attempt {result['kept_attempt'] + 1}")
        if stage.evaluate and cfg.eval_n and self.rank == 0:
            result["quick_eval"] = [asdict(r) for r in self.quick_evaluation()]
        if self.rank == 0 and cfg.stage_checkpoints:
            save(model, self.processor, Path(cfg.stage_checkpoints) / f"{index}-{stage.name}", dtype="float32")
            model.train()
        if (stage.evaluate or cfg.stage_checkpoints) and self.world > 1:
            dist.barrier()
        entry = {**asdict(stage), **result, "fast": self.fast, "wall_s": round(time.perf_counter() - t_stage, 1)}
        self.log(f"stage {stage.name}: {result['steps_done']} steps ({result['stopped_by']}), {entry['wall_s']} s")
        return entry

    def quick_evaluation(self) -> list:
        """Generated answers on a few test items of every set, direct and chain-of-thought (logged)."""
        modes = [PromptMode.DIRECT, PromptMode.COT]
        self.quick_cases = self.quick_cases or {
            str(m): build_cases(self.sets, self.cfg.eval_n, 1, m, offset=self.cfg.eval_offset) for m in modes}
        self.model.eval()
        with torch.compiler.set_stance("force_eager"):  # generation: other shapes, not worth compiling
            res = evaluate(self.sets, self.cfg.eval_n, 1, modes, model=self.model, processor=self.processor,
                           cases=self.quick_cases)
        self.model.train()
        self.log(format_table(res))
        return res

    def finish(self, out: Path, stage_log: list[dict]) -> dict:
        """Save the model (rank 0) and return the run's summary (written to training_log.json)."""
        cfg, totals = self.cfg, self.totals
        counts = torch.tensor([totals["replies"], totals["tokens"], totals["answer_tokens"]], dtype=torch.long)
        if self.world > 1:  # every process saw its own share of each batch
            dist.all_reduce(counts)
        replies, tokens, answer_tokens = counts.tolist()
        self.model.eval()
        if self.rank == 0:
            save(self.model, self.processor, out)
        summary = {
            "generator_version": generator_version(),
            "sets": self.sets,
            "config": {**asdict(cfg), "stages": [asdict(st) for st in self.stages], "spec": cfg.spec.to_dict()},
            "stages": stage_log,
            "parameters": self.n_params,
            "vocab_size": len(self.tokenizer),
            "steps": sum(st["steps_done"] for st in stage_log),
            "task_steps": totals["task_steps"],
            "stopped_by": "budget" if stage_log and stage_log[-1]["stopped_by"] == "budget" else "curriculum",
            "examples_seen": totals["task_steps"] * cfg.batch_size,
            "replies_seen": replies,
            "tokens_seen": tokens,
            "answer_tokens_seen": answer_tokens,
            "train_wall_s": round(sum(st["wall_s"] for st in stage_log), 1),
            "rank0_wall_s": round(time.perf_counter() - self.t_start, 1),
            "rank0_cpu_s": round(cpu_seconds() - self.cpu_start, 1),
            "procs": self.world,
            "threads": cfg.threads,
            "machine": {"platform": platform.platform(), "processor": platform.processor(),
                        "cpu_count": os.cpu_count(), "torch": torch.__version__},
            "history": self.history,
        }
        if self.rank == 0:
            (out / "training_log.json").write_text(json.dumps(summary, indent=1))
        return summary


def _train(rank: int, world: int, cfg: TrainConfig, out: Path) -> dict:
    trainer = Trainer(rank, world, cfg)
    stage_log: list[dict] = []
    for index, stage in enumerate(trainer.stages):
        stage_log.append(trainer.run_stage(index, stage))
        if stage_log[-1]["stopped_by"] == "budget":
            break
    return trainer.finish(out, stage_log)


def train(cfg: TrainConfig, out: Path) -> dict:
    """Run the training (in `cfg.procs` processes) and return the summary written to training_log.json."""
    import tempfile

    t0, cpu0, cpu_children0 = time.perf_counter(), cpu_seconds(), cpu_seconds(children=True)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        result = os.path.join(tmp, "summary.json")
        if cfg.procs > 1:
            import torch.multiprocessing as mp

            port = 29500 + random.Random(os.getpid()).randrange(2000)
            mp.spawn(_worker, args=(cfg.procs, cfg, str(out), port, result), nprocs=cfg.procs, join=True)
        else:
            _worker(0, 1, cfg, str(out), 0, result)
        summary = json.loads(Path(result).read_text())
    summary["total_wall_s"] = round(time.perf_counter() - t0, 1)
    summary["cpu_s"] = round(cpu_seconds() - cpu0 + cpu_seconds(children=True) - cpu_children0, 1)
    earlier = Path(cfg.init) / "training_log.json" if cfg.init else None
    if earlier is not None and earlier.is_file():
        summary = continued(json.loads(earlier.read_text()), summary, " ".join(sys.argv[1:]))
    (out / "training_log.json").write_text(json.dumps(summary, indent=1))
    return summary


#: the totals of a summary that add up over the commands of a run continued with `--init`
ADDITIVE = ("steps", "task_steps", "examples_seen", "replies_seen", "tokens_seen", "answer_tokens_seen",
            "train_wall_s", "rank0_wall_s", "rank0_cpu_s", "total_wall_s", "cpu_s")


def continued(before: dict, after: dict, command: str) -> dict:
    """The summary of a model trained by `before`'s run and then, from its folder (`--init`), by `after`'s:
    the stages of both in order, the totals added up, and the commands (the card lists them)."""
    merged = {**after, **{k: round(before.get(k, 0) + after.get(k, 0), 1) for k in ADDITIVE if k in after}}
    merged["stages"] = [*before.get("stages", []), *after.get("stages", [])]
    merged["history"] = [*before.get("history", []), *after.get("history", [])]
    merged["runs"] = [*before.get("runs", ["python -m facet_probe_dev.tiny_vlm.train"]),
                      f"python -m facet_probe_dev.tiny_vlm.train {command}".strip()]
    return merged


def save(model, processor, out: Path, dtype: str | None = None) -> None:
    """Standard `save_pretrained` folder, weights in `dtype` (default: `FP_TINY_VLM_DTYPE`, else bfloat16)."""
    if out.exists():
        for child in out.iterdir():
            if child.name != "__init__.py":
                shutil.rmtree(child) if child.is_dir() else child.unlink()
    out.mkdir(parents=True, exist_ok=True)
    model.to(getattr(torch, dtype or os.environ.get("FP_TINY_VLM_DTYPE", "bfloat16"))).save_pretrained(out)
    model.to(torch.float32)
    processor.save_pretrained(out)


def parse_args(argv: Sequence[str] | None) -> tuple[TrainConfig, argparse.Namespace]:
    from facet_probe.config.schema import asset_path

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=asset_path("tiny_vlm"))
    ap.add_argument("--card-n", type=int, default=30, help="test items per set for the model card")
    ap.add_argument("--card-k", type=int, default=2, help="audit orderings per item for the model card")
    ap.add_argument("--no-card", action="store_true")
    defaults = TrainConfig()
    for name, value in asdict(defaults).items():
        if isinstance(value, bool):
            ap.add_argument(f"--{name.replace('_', '-')}", type=lambda s: s.lower() in ("1", "true", "yes"),
                            default=value)
        elif isinstance(value, int | float | str):
            ap.add_argument(f"--{name.replace('_', '-')}", type=type(value), default=value)
    for name, value in asdict(defaults.spec).items():
        ap.add_argument(f"--{name.replace('_', '-')}", type=type(value), default=value)
    args = ap.parse_args(argv)
    spec = TinyVLMSpec(**{k: getattr(args, k) for k in asdict(defaults.spec)})
    plain = {k: getattr(args, k) for k in asdict(defaults) if k not in ("spec", "stages")}
    cfg = TrainConfig(**plain, spec=spec)
    if cfg.optimizer not in OPTIMIZERS:
        ap.error(f"--optimizer {cfg.optimizer!r}: choose one of {', '.join(OPTIMIZERS)}")
    try:
        cfg.resolved_stages()
    except (ValueError, FileNotFoundError) as err:
        ap.error(str(err))
    return cfg, args


def main(argv: Sequence[str] | None = None) -> None:
    cfg, args = parse_args(argv)
    out = Path(args.out)
    summary = train(cfg, out)
    print(f"trained {len(summary['stages'])} stages, {summary['steps']} steps: "
          f"{summary['total_wall_s']} s wall, {summary['cpu_s']} s CPU ({summary['procs']} processes)")
    if not args.no_card:
        from facet_probe_dev.tiny_vlm.card import write_card

        torch.set_num_threads(cfg.threads)
        t0 = time.perf_counter()
        write_card(out, summary, n=args.card_n, k=args.card_k)
        print(f"model card written ({time.perf_counter() - t0:.0f} s): {out / 'MODEL_CARD.md'}")


if __name__ == "__main__":
    main()
