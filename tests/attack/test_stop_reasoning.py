"""The stop-reasoning loss, pinned to a hand computation on a tiny LLaVA (byte-level BPE, EOS id 2) and on the
tiny copies of every family the attacks run on (each with its own end of turn).

The hand computation follows the reference (aiPenguin/StopReasoning, `utils/Attacker.py`): teacher-force
the model's own reply, take the logits ``L[k]`` predicting reply token ``k``, pull
``The answer is ().`` + end of turn with ``CE(cat(L[:4], L[5:8]), ids)`` (the letter slot, row 4,
skipped), and take the answer CE against the gold letter's token at the reply's own letter
(``nonzero(tokens == letter_id)[-1]``). Loss minimised = CE(template) - CE(gold at the own letter).
The reference tokenises ``f"The answer is ().{end_sym}"`` whole, `end_sym` being ``###`` for MiniGPT-4 on
Vicuna v0 (`eval_configs/minigpt4_eval.yaml`) and ``</s>`` for its LLaMA-2 config.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from helpers import attack_settings, samples

from facet_probe.runners.hf.blip2 import Blip2Runner, MiniGPT4Runner
from facet_probe.runners.hf.gemma3 import Gemma3Runner
from facet_probe.runners.hf.idefics import IdeficsRunner
from facet_probe.runners.hf.internvl import InternVLRunner
from facet_probe.runners.hf.llava import LlavaRunner
from facet_probe.runners.hf.qwen import QwenRunner
from facet_probe_dev.testing.tiny_models import tiny_model_path

# tiny family -> (adapter, its settings, the end of turn of the family's conversation format, whether that format
# writes it after an assistant turn; InstructBLIP's plain prompt has no turns: its targets end with the LM's EOS)
END_OF_TURN = {
    "qwen3_5": (QwenRunner, {"thinking": False}, "<|im_end|>", True),
    "internvl": (InternVLRunner, {"max_tiles": 1}, "<|im_end|>", True),
    "llava": (LlavaRunner, {}, "</s>", True),
    "gemma3": (Gemma3Runner, {}, "<end_of_turn>", True),
    "idefics": (IdeficsRunner, {}, "<end_of_utterance>", True),
    "minigpt4": (MiniGPT4Runner, {}, "###", True),
    "blip2": (MiniGPT4Runner, {}, "###", True),  # MiniGPT-4's adapter on the BLIP-2 copy with an `<image>` token
    "instructblip": (Blip2Runner, {}, "</s>", False),
}


@pytest.fixture(scope="module")
def family_runner(tiny_root):
    """family -> the loaded runner on its tiny copy (cached)."""
    cache = {}

    def make(family):
        if family not in cache:
            cls, kw, _, _ = END_OF_TURN[family]
            cache[family] = cls(name=f"tiny_{family}", model_id="tiny/x", dtype="float32",
                                local_path=str(tiny_model_path(family, tiny_root)), **kw)
            cache[family].check_ready()
        return cache[family]

    return make


def reply_rows(runner, sample, reply):
    """The reply's token ids and the logits rows predicting reply tokens 0..len (the last: after the reply)."""
    enc = runner.encode(sample.prompt, reply)
    start = enc.target_span[0]
    pix = runner.pixel_inputs(enc.images01)
    with torch.no_grad():
        logits = runner.forward_logits(enc, pix, list(range(start - 1, len(enc))))
    return enc.input_ids[start:].tolist(), logits.float(), pix


def loss_of(runner, sample, reply, **settings):
    s = attack_settings(name="stop_reasoning", **settings)
    objective = s.objective
    forced = objective.prepare(runner, sample, reply)
    with torch.no_grad():
        logits = runner.forward_logits(forced.encoded, runner.pixel_inputs(forced.encoded.images01), forced.positions)
    loss, parts = objective.loss(forced, logits, sample)
    return float(loss), parts


def tok(runner, text):
    return runner.tokenizer(text, add_special_tokens=False)["input_ids"]


@pytest.mark.parametrize("reply_letter", ["gold", "other"])
@pytest.mark.parametrize("answer_first", [False, True])
def test_the_reference_form_pulls_the_whole_template_over_the_own_reply(llava, reply_letter, answer_first):
    sample = samples(1)[0]
    letter = sample.gold if reply_letter == "gold" else next(x for x in sample.labels if x != sample.gold)
    reply = (f"The answer is ({letter}). It is round and red." if answer_first
             else f"It is round and red. The answer is ({letter}).")
    ids, rows, _ = reply_rows(llava, sample, reply)
    eos = llava.model.generation_config.eos_token_id
    eos = eos[0] if isinstance(eos, list) else eos
    target = tok(llava, "The answer is ().") + [eos]
    assert len(target) == 7  # 'The', ' answer', ' is', ' (', ')', '.', EOS: the reference's 4 + 3 rows
    template_ce = F.cross_entropy(torch.cat((rows[:4], rows[5:8])), torch.tensor(target))
    letter_id = tok(llava, f"({letter})")[1]
    gold_id = tok(llava, f"({sample.gold})")[1]
    pos = max(i for i, t in enumerate(ids) if t == letter_id)  # the letter the reply itself gives
    answer_ce = F.cross_entropy(rows[pos][None], torch.tensor([gold_id]))
    loss, parts = loss_of(llava, sample, reply)
    assert parts["template_ce"] == pytest.approx(float(template_ce), abs=1e-5)
    assert parts["answer_ce"] == pytest.approx(float(answer_ce), abs=1e-5)
    assert loss == pytest.approx(float(template_ce - answer_ce), abs=1e-5)
    weighted, _ = loss_of(llava, sample, reply, template_weight=2.0, answer_weight=0.5)
    assert weighted == pytest.approx(float(2 * template_ce - 0.5 * answer_ce), abs=1e-5)


def test_the_template_form_forces_the_template_and_scores_its_letter_slot(llava):
    """`attack.objective.sequence=template`: the forced sequence is ``The answer is (G).``; the tokens before the
    letter are pulled, the answer CE sits at the template's own slot, whatever the model replied."""
    sample = samples(1)[0]
    ids, rows, _ = reply_rows(llava, sample, f"The answer is ({sample.gold}).")
    template_ce = F.cross_entropy(rows[:4], torch.tensor(ids[:4]))
    answer_ce = F.cross_entropy(rows[4][None], torch.tensor([ids[4]]))
    loss, parts = loss_of(llava, sample, f"It is round and red. The answer is ({sample.gold}).", sequence="template")
    assert parts["template_ce"] == pytest.approx(float(template_ce), abs=1e-5)
    assert loss == pytest.approx(float(template_ce - answer_ce), abs=1e-5)


def test_a_reply_shorter_than_the_template_pulls_the_rows_it_has(llava):
    """Logits exist up to the row after the reply's last token; template tokens past it are dropped."""
    sample = samples(1)[0]
    reply = f"({sample.gold})"
    ids, rows, _ = reply_rows(llava, sample, reply)
    assert len(ids) == 3  # '(', letter, ')': rows 0..3 exist
    eos = llava.model.generation_config.eos_token_id
    target = (tok(llava, "The answer is ().") + [eos[0] if isinstance(eos, list) else eos])
    s = attack_settings(name="stop_reasoning")
    forced = s.objective.prepare(llava, sample, reply)
    assert forced.template_ids == target[:4]  # template indices 0..3 (the slot, 4, and after are past the reply)
    template_ce = F.cross_entropy(rows[:4], torch.tensor(target[:4]))
    _, parts = loss_of(llava, sample, reply)
    assert parts["template_ce"] == pytest.approx(float(template_ce), abs=1e-5)


def reference_template_ce(runner, sample, reply, end_sym):
    """The reference's `stop_reasoning` loss term on the logits of `reply`: the tokens of
    ``f"The answer is ().{end_sym}"`` against ``cat(L[:4], L[5:8])``."""
    _, rows, _ = reply_rows(runner, sample, reply)
    target = tok(runner, f"The answer is ().{end_sym}")
    assert len(target) == 7  # 'The', ' answer', ' is', ' (', ')', '.', end: 4 + 3 rows as in the reference
    return F.cross_entropy(torch.cat((rows[:4], rows[5:8])), torch.tensor(target)), target


@pytest.mark.parametrize("family", sorted(END_OF_TURN))
def test_the_template_ends_with_the_familys_end_of_turn_as_the_reference_tokenises_it(family_runner, family):
    """Each family declares the token its conversation format closes a reply with (MiniGPT-4: the reference's
    ``###``; IDEFICS: ``<end_of_utterance>``; Gemma3: ``<end_of_turn>``, not the ``</s>`` / ``<eos>`` their
    generation configs list first), and the stop-reasoning template ends with it."""
    runner = family_runner(family)
    _, _, end, marked = END_OF_TURN[family]
    sample = samples(1)[0]
    reply = f"It is round and red. The answer is ({sample.gold})."
    expected, target = reference_template_ce(runner, sample, reply, end)
    _, parts = loss_of(runner, sample, reply)
    assert parts["template_ce"] == pytest.approx(float(expected), abs=1e-5)
    forced = attack_settings(name="stop_reasoning").objective.prepare(runner, sample, reply)
    assert forced.template_ids == target  # every template token, the letter's left out, then the end of turn
    assert runner.end_of_turn == end  # declared by the family, and what its conversation format writes:
    turns = [{"role": "user", "content": [{"type": "text", "text": "Which?"}]},
             {"role": "assistant", "content": [{"type": "text", "text": "It is red."}]}]
    rendered = runner.tokenizer.apply_chat_template(turns, chat_template=runner._template, tokenize=False,
                                                    **runner.chat_template_options())
    after = rendered.split("It is red.", 1)[1]
    assert after.startswith(end) if marked else (after == "" and end == runner.tokenizer.eos_token)


def test_minigpt4s_template_and_its_pixel_gradient_are_the_references_and_eos_is_its_llama2_form(family_runner):
    """On the paper's victim the loss and its pixel gradient equal the reference's with `end_sym="###"`;
    `attack.objective.end_of_reply=eos` gives the reference's LLaMA-2 form, `end_sym="</s>"`."""
    runner = family_runner("minigpt4")
    sample = samples(1)[0]
    reply = f"The answer is ({sample.gold}). It is round and red."
    for end_of_reply, end_sym in (("turn", "###"), ("eos", "</s>")):
        s = attack_settings(name="stop_reasoning", end_of_reply=end_of_reply, answer_weight=0.0)
        forced = s.objective.prepare(runner, sample, reply)
        x = [im.clone().requires_grad_(True) for im in forced.encoded.images01]
        ours, _ = s.objective.loss(forced, runner.forward_logits(forced.encoded, runner.pixel_inputs(x),
                                                                 forced.positions), sample)
        (grad_ours,) = torch.autograd.grad(ours, x)
        enc = runner.encode(sample.prompt, reply)
        start = enc.target_span[0]
        y = [im.clone().requires_grad_(True) for im in enc.images01]
        rows = runner.forward_logits(enc, runner.pixel_inputs(y), list(range(start - 1, len(enc)))).float()
        target = tok(runner, f"The answer is ().{end_sym}")
        reference = F.cross_entropy(torch.cat((rows[:4], rows[5:8])), torch.tensor(target))
        (grad_reference,) = torch.autograd.grad(reference, y)
        assert float(ours.detach()) == pytest.approx(float(reference.detach()), abs=1e-5), end_of_reply
        torch.testing.assert_close(grad_ours, grad_reference, atol=1e-6, rtol=1e-4)
        assert float(grad_reference.abs().sum()) > 0
