"""The PGD driver (paper, Appendices A and B), run on several samples in lockstep.

Per sample: random start inside the eps ball; then each step

1. a teacher-forced forward on the current forced sequence (the objective's view of the pseudo-target,
   i.e. the latest greedy reply; the template for stop-reasoning) with the current adversarial image,
2. the objective's loss, its gradient with respect to the [0,1] pixels,
3. a signed-gradient step of size alpha, the projection onto ``||x_adv - x||_inf <= eps`` and the clamp
   to [0,1];

every `update_every` steps the pseudo-target is refreshed by greedy generation on the *current*
adversarial image (8-bit quantised, i.e. exactly what is saved, unless ``attack.quantize=false``) and the
objective's success rule is checked on it (`Objective.success`); a sample that meets them stops early (unless
``attack.early_stop=false``). A final greedy generation on the final image decides success; when the
last refresh already ran on that same image, its reply is reused rather than generated again.

Generations per sample: 1 clean (by the caller) + floor(steps_run / update_every) refreshes + 1 final
unless the last step was a refresh. Forwards: one per step for the batch of active samples (plus one
no-grad forward on the clean image per new pseudo-target for the rationale attack).
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
from facet_probe.attack.objectives.base import Forced, Objective, Sample
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
    steps_run: int = 0
    refreshes: int = 0
    stopped_early: bool = False
    curve: dict[str, list[float]] = field(default_factory=dict)  # per step: loss and its components
    pseudo_targets: list[tuple[int, str]] = field(default_factory=list)  # (step, reply) at each refresh
    linf: float = 0.0
    success: bool = False  # the final reply meets the attack's criteria
    error: str | None = None  # why the sample could not be attacked


@dataclass
class Timings:
    """Wall-clock totals of one `run_pgd` call (the benchmark reads these)."""

    step_s: float = 0.0
    steps: int = 0  # batched steps (one forward + backward each)
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
    last_eval: tuple[int, str] | None = None  # (step, reply) of the latest refresh


def _evaluated(settings: AttackSettings, st: _State) -> list[torch.Tensor]:
    return st.box.quantize(st.adv) if settings.quantize else [x.detach().clone() for x in st.adv]


def run_pgd(adapter, samples: Sequence[Sample], clean_replies: Sequence[str], objective: Objective,
            settings: AttackSettings, *, ops: ModelOps | None = None, max_new_tokens: int = 64, seed: int = 0,
            on_step: Callable[[int, list[_State]], None] | None = None, timings: Timings | None = None,
            encodeds: Sequence | None = None) -> list[PGDResult]:
    """Attack `samples` (whose clean greedy replies are `clean_replies`) together; one result each.

    `encodeds`: the samples' prompt encodings when the caller has them (else they are encoded here);
    `on_step(step, active_states)` is called after every step (tests check the feasible set with it)."""
    ops = ops or ModelOps(adapter, batch_size=len(samples))
    timings = timings if timings is not None else Timings()
    device = adapter.input_device if hasattr(adapter, "input_device") else torch.device("cpu")
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
        states.append(_State(sample, box, box.random_start(gen), enc.prompt_only(), forced, result))

    if objective.needs_reference:
        _set_references(adapter, ops, states, timings)

    for t in range(1, settings.steps + 1):
        active = [s for s in states if not s.done]
        if not active:
            break
        t0 = time.perf_counter()
        xs = [[x.clone().requires_grad_(True) for x in s.adv] for s in active]
        with torch.enable_grad():
            pixels = [adapter.pixel_inputs(x) for x in xs]
            logits = ops.forward([s.forced.encoded for s in active], pixels, [s.forced.positions for s in active])
            total = None
            for s, lg in zip(active, logits, strict=True):
                loss, parts = objective.loss(s.forced, lg, s.sample)
                for k, v in parts.items():
                    s.result.curve.setdefault(k, []).append(v)
                total = loss if total is None else total + loss
            flat = [x for row in xs for x in row]
            grads = torch.autograd.grad(total, flat, allow_unused=True)
        i = 0
        for s, row in zip(active, xs, strict=True):
            g = [torch.zeros_like(x) if gr is None else gr for x, gr in zip(row, grads[i:i + len(row)], strict=True)]
            i += len(row)
            s.adv = s.box.step(row, g, settings.alpha)
            s.result.steps_run = t
        timings.step_s += time.perf_counter() - t0
        timings.steps += 1
        if on_step is not None:
            on_step(t, active)
        if t % settings.update_every == 0:
            _refresh(adapter, ops, objective, settings, active, t, max_new_tokens, timings)

    # final greedy generation decides success (reuse the last refresh when it saw the final image)
    t0 = time.perf_counter()
    need = [s for s in states if not (s.last_eval and s.last_eval[0] == s.result.steps_run)]
    if need:
        with torch.no_grad():
            texts = ops.generate([s.prompt_enc for s in need],
                                 [adapter.pixel_inputs(_evaluated(settings, s)) for s in need], max_new_tokens)
        for s, text in zip(need, texts, strict=True):
            s.last_eval = (s.result.steps_run, text)
    timings.final_s += time.perf_counter() - t0
    for s in states:
        r = s.result
        r.adv_images = _evaluated(settings, s)
        r.linf = s.box.linf(r.adv_images)
        r.final = s.sample.read(s.last_eval[1])
        r.success = objective.success(r.final)
    return results


def _refresh(adapter, ops: ModelOps, objective: Objective, settings: AttackSettings, active: list[_State],
             step: int, max_new_tokens: int, timings: Timings) -> None:
    """Greedy replies on the current images; early stop; new forced sequences (and clean references)."""
    t0 = time.perf_counter()
    with torch.no_grad():
        texts = ops.generate([s.prompt_enc for s in active],
                             [adapter.pixel_inputs(_evaluated(settings, s)) for s in active], max_new_tokens)
    changed = []
    for s, text in zip(active, texts, strict=True):
        s.last_eval = (step, text)
        s.result.refreshes += 1
        s.result.pseudo_targets.append((step, text))
        reading = s.sample.read(text)
        if settings.early_stop and objective.success(reading):
            s.done = True
            s.result.stopped_early = step < settings.steps
            continue
        if objective.follows_pseudo_target and text != s.forced.text:
            try:
                forced = objective.prepare(adapter, s.sample, text)
            except SpanError as exc:
                log.debug("%s: keeping the previous pseudo-target (%s)", s.sample.sample_id, exc)
                forced = None
            if forced is not None:  # a reply without an answer keeps the previous forced sequence
                s.forced = forced
                changed.append(s)
    timings.refresh_s += time.perf_counter() - t0
    timings.refreshes += 1
    if objective.needs_reference and changed:
        _set_references(adapter, ops, changed, timings)


def _set_references(adapter, ops: ModelOps, states: list[_State], timings: Timings) -> None:
    """Clean-image log-probs at each forced sequence's rationale rows (no gradient)."""
    t0 = time.perf_counter()
    todo = [s for s in states if s.forced.rationale_rows]
    with torch.no_grad():
        logits = ops.forward([s.forced.encoded for s in todo], [adapter.pixel_inputs(s.box.clean) for s in todo],
                             [s.forced.positions for s in todo])
    for s, lg in zip(todo, logits, strict=True):
        s.forced.reference = torch.log_softmax(lg[s.forced.rationale_rows].float(), dim=-1).detach()
    timings.reference_s += time.perf_counter() - t0
