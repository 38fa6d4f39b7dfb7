"""The PGD driver (paper, Appendices A and B), run on several samples in lockstep.

Per sample: a random start inside the eps ball; then `attack.steps` = N iterations i = 0..N-1 on the image x_i:

1. a teacher-forced forward on the current forced sequence (the objective's view of the pseudo-target,
   i.e. the latest greedy reply; the template for stop-reasoning's `template` form) with x_i,
2. the objective's loss and its gradient with respect to the [0,1] pixels,
3. the loop's rules (`attack.loop`, `attack.loop.LoopRules`): whether this iteration stops (the last one under
   `last_iteration=loss_only`; an early stop under `early_stop_check=forced_argmax`), and a refresh of the
   pseudo-target before the step when `refresh_image=before_step`,
4. a signed-gradient step of size alpha, the projection onto ``||x_adv - x||_inf <= eps`` and the clamp
   to [0,1], then a refresh after the step when `refresh_image=after_step` (the project's loop).

A refresh (every `update_every` iterations) is a greedy generation on the current adversarial image (8-bit
quantised, i.e. exactly what is saved, unless ``attack.quantize=false``); under the project's loop a sample
whose reply meets the success rule stops there (unless ``attack.early_stop=false``). A final greedy generation
on the final image decides success; when the last refresh already ran on that same image, its reply is reused.

Generations per sample under the project's loop: 1 clean (by the caller) + floor(steps_run / update_every)
refreshes + 1 final unless the last step was a refresh. Forwards: one per iteration for the batch of active
samples (plus, for the rationale attack, one no-grad forward per new reference distribution).
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch

from facet_probe.attack.batching import ModelOps
from facet_probe.attack.config import AttackSettings
from facet_probe.attack.criteria import Reading
from facet_probe.attack.loop import EarlyStopCheck, KLReference, RefreshImage, SuccessRule, wrong_answer
from facet_probe.attack.objectives.base import Forced, Objective, Sample, with_reply_rows
from facet_probe.attack.pixels import PixelBox
from facet_probe.attack.spans import SpanError

log = logging.getLogger("facet_probe.attack")


def sample_seed(seed: int, sample_id: str) -> int:
    """The random-start seed of one sample: independent of which other samples share its batch."""
    return int.from_bytes(hashlib.sha256(f"{int(seed)}:{sample_id}".encode()).digest()[:8], "little")


@dataclass
class PGDResult:
    """One sample's attack: the images, the final reply and how the attack went."""

    sample: Sample
    clean_images: list[torch.Tensor]
    adv_images: list[torch.Tensor]  # the evaluated adversarial images (8-bit unless quantize=false)
    final: Reading | None = None
    steps_run: int = 0  # iterations that computed a loss (len(curve["loss"]))
    updates: int = 0  # signed steps taken (steps_run, or one fewer under attack.loop.last_iteration=loss_only)
    refreshes: int = 0
    stopped_early: bool = False
    curve: dict[str, list[float]] = field(default_factory=dict)  # per iteration: loss and its components
    pseudo_targets: list[tuple[int, str]] = field(default_factory=list)  # (updates so far, reply) at each refresh
    linf: float = 0.0
    success: bool = False  # the final reply meets the loop's success rule (attack.loop.success)
    reference_success: bool = False  # the final answer is wrong (the reference's rule), whatever the loop's
    error: str | None = None  # why the sample could not be attacked


@dataclass
class Timings:
    """Wall-clock totals of one `run_pgd` call (the benchmark reads these)."""

    step_s: float = 0.0
    steps: int = 0  # batched iterations (one forward + backward each)
    refresh_s: float = 0.0
    refreshes: int = 0  # batched refresh generations
    final_s: float = 0.0
    reference_s: float = 0.0


@dataclass
class _State:
    sample: Sample
    box: PixelBox
    adv: list[torch.Tensor]
    prompt_enc: object
    forced: Forced
    result: PGDResult
    done: bool = False
    last_eval: tuple[int, str] | None = None  # (updates, reply) of the latest refresh
    pending_stop: bool = False  # forced_argmax + stop_on_update: a wrong argmax answer waits for the next refresh
    target_lost: bool = False  # forced_argmax: the latest refresh gave no answer to force (ends the next iteration)


def _evaluated(settings: AttackSettings, st: _State) -> list[torch.Tensor]:
    return st.box.quantize(st.adv) if settings.quantize else [x.detach().clone() for x in st.adv]


def _stop(st: _State, early: bool = True) -> None:
    st.done = True
    st.result.stopped_early = early


def run_pgd(adapter, samples: Sequence[Sample], clean_replies: Sequence[str], objective: Objective,
            settings: AttackSettings, *, ops: ModelOps | None = None, max_new_tokens: int = 64, seed: int = 0,
            on_step: Callable[[int, list[_State]], None] | None = None, timings: Timings | None = None,
            encodeds: Sequence | None = None) -> list[PGDResult]:
    """Attack `samples` (whose clean greedy replies are `clean_replies`) together; one result each.

    `encodeds`: the samples' prompt encodings when the caller has them (else they are encoded here);
    `on_step(updates, states)` is called after every step with the states that stepped (tests check the feasible
    set with it)."""
    ops = ops or ModelOps(adapter, batch_size=len(samples))
    timings = timings if timings is not None else Timings()
    rules = settings.loop
    argmax = rules.early_stop_check is EarlyStopCheck.FORCED_ARGMAX
    device = adapter.input_device
    results: list[PGDResult] = []
    states: list[_State] = []
    encodeds = encodeds if encodeds is not None else [adapter.encode(s.prompt) for s in samples]
    for sample, reply, enc in zip(samples, clean_replies, encodeds, strict=True):
        clean = [x.to(device) for x in enc.images01]
        result = PGDResult(sample, clean_images=clean, adv_images=[x.clone() for x in clean])
        results.append(result)
        try:
            box = PixelBox(clean, settings.eps)
            forced = objective.prepare(adapter, sample, reply)
            if forced is None:
                raise SpanError("the clean reply has no locatable answer to attack")
        except (SpanError, ValueError) as exc:
            result.error = f"{type(exc).__name__}: {exc}"
            log.warning("%s: not attacked: %s", sample.sample_id, result.error)
            continue
        gen = torch.Generator().manual_seed(sample_seed(seed, sample.sample_id))
        forced = with_reply_rows(forced) if argmax else forced
        states.append(_State(sample, box, box.random_start(gen), enc.prompt_only(), forced, result))

    if objective.needs_reference:  # the first reference: the clean image (the reference's clean generation)
        _set_references(adapter, ops, states, timings, lambda s: s.box.clean)

    for i in range(settings.steps):
        for s in states:
            if not s.done and s.target_lost:  # the reference's next iteration finds no answer to attack
                _stop(s)
        active = [s for s in states if not s.done]
        if not active:
            break
        t0 = time.perf_counter()
        stepping = _iteration(adapter, ops, objective, settings, active, i)
        if rules.refresh_image is RefreshImage.BEFORE_STEP and rules.refresh_due(i, settings.update_every):
            _refresh(adapter, ops, objective, settings, [s for s, _ in stepping], max_new_tokens, timings, more=True)
            stepping = [(s, grads) for s, grads in stepping if not s.done]
        for s, grads in stepping:
            s.adv = s.box.step(s.adv, grads, settings.alpha)
            s.result.updates += 1
        timings.step_s += time.perf_counter() - t0
        timings.steps += 1
        stepped = [s for s, _ in stepping]
        if on_step is not None and stepped:
            on_step(i + 1, stepped)
        if rules.refresh_image is RefreshImage.AFTER_STEP and rules.refresh_due(i, settings.update_every):
            _refresh(adapter, ops, objective, settings, stepped, max_new_tokens, timings,
                     more=i < settings.steps - 1)

    # final greedy generation decides success (reuse the last refresh when it saw the final image)
    t0 = time.perf_counter()
    need = [s for s in states if not (s.last_eval and s.last_eval[0] == s.result.updates)]
    if need:
        with torch.no_grad():
            texts = ops.generate([s.prompt_enc for s in need],
                                 [adapter.pixel_inputs(_evaluated(settings, s)) for s in need], max_new_tokens)
        for s, text in zip(need, texts, strict=True):
            s.last_eval = (s.result.updates, text)
    timings.final_s += time.perf_counter() - t0
    for s in states:
        r = s.result
        r.adv_images = _evaluated(settings, s)
        r.linf = s.box.linf(r.adv_images)
        assert s.last_eval is not None, "every state's reply was refreshed above"
        r.final = s.sample.read(s.last_eval[1])
        r.reference_success = wrong_answer(r.final.answer, r.final.correct, s.sample.target)
        r.success = _succeeded(settings, objective, s.sample, r.final)
    return results


def _succeeded(settings: AttackSettings, objective: Objective, sample: Sample, reading: Reading) -> bool:
    """The loop's success rule (`attack.loop.success`): the objective's, or a wrong answer (the reference's)."""
    if settings.loop.success is SuccessRule.WRONG_ANSWER:
        return wrong_answer(reading.answer, reading.correct, sample.target)
    return objective.success(reading)


def _argmax_reading(adapter, st: _State, logits: torch.Tensor) -> Reading:
    """What the teacher-forced argmax text says: the token each reply row predicts, decoded and read."""
    ids = logits[st.forced.reply_rows].argmax(-1).tolist()
    return st.sample.read(adapter.tokenizer.decode(ids))


def _iteration(adapter, ops: ModelOps, objective: Objective, settings: AttackSettings, active: list[_State],
               i: int) -> list[tuple[_State, list[torch.Tensor]]]:
    """Iteration `i`: the forward on each sample's current image, its loss and gradient, and the checks before the
    step (`attack.loop`); the samples that go on to step, each with its gradient."""
    rules = settings.loop
    argmax = rules.early_stop_check is EarlyStopCheck.FORCED_ARGMAX
    xs = [[x.clone().requires_grad_(True) for x in s.adv] for s in active]
    going: list[tuple[_State, list[torch.Tensor], Reading | None]] = []
    with torch.enable_grad():
        pixels = [adapter.pixel_inputs(x) for x in xs]
        logits = ops.forward([s.forced.encoded for s in active], pixels, [s.forced.positions for s in active])
        total: torch.Tensor | None = None
        for s, row, lg in zip(active, xs, logits, strict=True):
            reading = _argmax_reading(adapter, s, lg.detach()) if argmax else None
            if reading is not None and reading.answer is None:  # the reference breaks: no letter to attack
                _stop(s)
                continue
            loss, parts = objective.loss(s.forced, lg, s.sample)
            for name, v in parts.items():
                s.result.curve.setdefault(name, []).append(v)
            s.result.steps_run += 1
            total = loss if total is None else total + loss
            going.append((s, row, reading))
        flat = [x for _, row, _ in going for x in row]
        grads = torch.autograd.grad(total, flat, allow_unused=True) if total is not None else ()  # None: none going
    out, k = [], 0
    for s, row, reading in going:
        g = [torch.zeros_like(x) if gr is None else gr for x, gr in zip(row, grads[k:k + len(row)], strict=True)]
        k += len(row)
        if not rules.steps(i, settings.steps):  # the reference's last iteration records its loss only
            _stop(s, early=False)
        elif reading is not None and settings.early_stop and wrong_answer(reading.answer, reading.correct,
                                                                          s.sample.target):
            s.pending_stop = True
            if not rules.stop_on_update:
                _stop(s)
        if not s.done:
            out.append((s, g))
    return out


def _refresh(adapter, ops: ModelOps, objective: Objective, settings: AttackSettings, active: list[_State],
             max_new_tokens: int, timings: Timings, more: bool) -> None:
    """Greedy replies on the current images; early stop (`attack.loop.early_stop_check`); new forced sequences and
    the rationale attack's reference distributions (`attack.loop.kl_reference`). `more`: whether further steps
    would follow (a stop here is then early)."""
    if not active:
        return
    rules = settings.loop
    t0 = time.perf_counter()
    images = {id(s): _evaluated(settings, s) for s in active}
    with torch.no_grad():
        texts = ops.generate([s.prompt_enc for s in active], [adapter.pixel_inputs(images[id(s)]) for s in active],
                             max_new_tokens)
    changed, kept = [], []
    for s, text in zip(active, texts, strict=True):
        s.last_eval = (s.result.updates, text)
        s.result.refreshes += 1
        s.result.pseudo_targets.append((s.result.updates, text))
        reading = s.sample.read(text)
        if rules.early_stop_check is EarlyStopCheck.REFRESH_REPLY:
            if settings.early_stop and _succeeded(settings, objective, s.sample, reading):
                _stop(s, early=more)
                continue
        else:
            if objective.aims_at_answer_first and reading.answer is not None and not reading.answer_first:
                s.pending_stop = False  # the reference: a stop-reasoning reply that still reasons clears the stop
            if s.pending_stop:
                _stop(s, early=more)
                continue
        kept.append(s)
        if objective.follows_pseudo_target and text != s.forced.text:
            try:
                forced = objective.prepare(adapter, s.sample, text)
            except SpanError as exc:
                log.debug("%s: no forced sequence for the new pseudo-target (%s)", s.sample.sample_id, exc)
                forced = None
            if forced is not None:
                s.forced = with_reply_rows(forced) if rules.early_stop_check is EarlyStopCheck.FORCED_ARGMAX \
                    else forced
                changed.append(s)
            elif rules.early_stop_check is EarlyStopCheck.FORCED_ARGMAX:
                s.target_lost = True  # the reference forces the answerless reply and then finds no answer
            # else: a reply without an answer keeps the previous forced sequence
    timings.refresh_s += time.perf_counter() - t0
    timings.refreshes += 1
    if objective.needs_reference:
        if rules.kl_reference is KLReference.REFRESH:  # retaken at every refresh, on the image it generated on
            _set_references(adapter, ops, kept, timings, lambda s: images[id(s)])
        elif changed:
            _set_references(adapter, ops, changed, timings, lambda s: s.box.clean)


def _set_references(adapter, ops: ModelOps, states: list[_State], timings: Timings,
                    image: Callable[[_State], list[torch.Tensor]]) -> None:
    """Log-probs at each forced sequence's rationale rows on `image(state)` (no gradient): the rationale
    attack's reference distribution."""
    t0 = time.perf_counter()
    todo = [s for s in states if s.forced.rationale_rows]
    with torch.no_grad():
        logits = ops.forward([s.forced.encoded for s in todo], [adapter.pixel_inputs(image(s)) for s in todo],
                             [s.forced.positions for s in todo])
    for s, lg in zip(todo, logits, strict=True):
        s.forced.reference = torch.log_softmax(lg[s.forced.rationale_rows].float(), dim=-1).detach()
    timings.reference_s += time.perf_counter() - t0
