"""The reference's ImageNet wording (issue 23.4): "What is the class of the image?" answered "The class of
the image is (X).", read by the parser with that lead and pulled as the stop-reasoning template."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from helpers import attack_settings

from facet_probe.attack.preset import PromptPreset
from facet_probe.attack.run import build_samples
from facet_probe.core.prompts import PromptMode
from facet_probe.datasets.imagenet import QUESTION
from facet_probe.datasets.synthetic.visual_mcq import SyntheticVisualMCQ
from facet_probe.scoring.parsing import ParseStatus, parse_letter

CLASS = "The class of the image is"


def imagenet_sample(preset=PromptPreset.REFERENCE):
    item = SyntheticVisualMCQ(name="synthetic_visual_mcq", n=1, seed=42).load()[0].model_copy(update={"question": QUESTION})
    (sample,) = build_samples([item], PromptMode.COT, attack_settings("stop_reasoning"), 0, preset)
    return sample


def test_the_parser_reads_the_class_sentence_as_the_instructed_form_when_asked_to():
    reply = "It has four legs and fur. The class of the image is (B)."
    assert parse_letter(reply, "ABCD", "cot", cot_prefix=CLASS) == (
        parse_letter(reply.replace(CLASS, "The answer is"), "ABCD", "cot"))
    parsed = parse_letter(reply, "ABCD", "cot", cot_prefix=CLASS)
    assert (parsed.answer, parsed.status, parsed.rule) == ("B", ParseStatus.OK, "cot")
    # the project's lead is unchanged: the class sentence is only a fallback ("(B)" once) there
    assert parse_letter(reply, "ABCD", "cot").status == ParseStatus.FALLBACK
    assert parse_letter("The final class of the image is (C).", "ABCD", "cot", cot_prefix=CLASS).answer == "C"


def test_the_reference_preset_asks_imagenet_items_for_the_class_sentence_and_reads_it():
    sample = imagenet_sample()
    text = sample.prompt.messages[0].text()
    assert text.startswith(f"{QUESTION}\nChoices: (A) ")  # utils/datasets.py: no "Question: " lead for ImageNet
    assert text.endswith("The answer should be in the form 'The class of the image is ().'")
    assert sample.answer_prefix == CLASS and imagenet_sample(PromptPreset.PROJECT).answer_prefix == "The answer is"
    reasoned = sample.read(f"It has fur. It barks. {CLASS} ({sample.gold}).")
    assert reasoned.correct and reasoned.rationale == "It has fur. It barks." and not reasoned.answer_first
    wrong = next(lab for lab in sample.labels if lab != sample.gold)
    first = sample.read(f"{CLASS} ({wrong}). It has fur.")
    assert not first.correct and first.answer_first and first.parse_rule == "cot"
    assert attack_settings("stop_reasoning").objective.success(first)


def test_the_stop_reasoning_template_is_the_class_sentence_with_its_letter_slot_skipped(llava):
    """As the reference's `cat(logits[:7], logits[8:10])` over "The class of the image is ().</s>" (its
    tokenizer): every template token but the letter's, at the positions of a reply that starts with it."""
    sample = imagenet_sample()
    reply = f"It has four legs and fur and it barks loudly at night. {CLASS} ({sample.gold})."
    forced = attack_settings("stop_reasoning").objective.prepare(llava, sample, reply)
    eos = llava.model.generation_config.eos_token_id
    eos = eos[0] if isinstance(eos, list) else eos
    before = llava.tokenizer(f"{CLASS} (", add_special_tokens=False)["input_ids"]
    with_letter = llava.tokenizer(f"{CLASS} ({sample.gold}).", add_special_tokens=False)["input_ids"]
    slot = len(before)
    assert with_letter[:slot] == before
    target = [t for i, t in enumerate(with_letter) if i != slot] + [eos]
    assert forced.template_ids == target
    enc = forced.encoded
    start = enc.target_span[0]
    with torch.no_grad():
        logits = llava.forward_logits(enc, llava.pixel_inputs(enc.images01), list(range(start - 1, len(enc))))
    rows = torch.cat([logits[:slot], logits[slot + 1:len(target) + 1]]).float()
    _, parts = sample_loss(llava, sample, forced)
    assert parts["template_ce"] == pytest.approx(float(F.cross_entropy(rows, torch.tensor(target))), abs=1e-5)


def sample_loss(runner, sample, forced):
    with torch.no_grad():
        logits = runner.forward_logits(forced.encoded, runner.pixel_inputs(forced.encoded.images01), forced.positions)
    return attack_settings("stop_reasoning").objective.loss(forced, logits, sample)
