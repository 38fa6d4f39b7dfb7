"""The stop-reasoning loss, pinned to a hand computation on a tiny LLaVA (byte-level BPE, EOS id 2).

The hand computation follows the reference (aiPenguin/StopReasoning, `utils/Attacker.py`): teacher-force
the model's own reply, take the logits ``L[k]`` predicting reply token ``k``, pull
``The answer is ().`` + end of turn with ``CE(cat(L[:4], L[5:8]), ids)`` (the letter slot, row 4,
skipped), and take the answer CE against the gold letter's token at the reply's own letter
(``nonzero(tokens == letter_id)[-1]``). Loss minimised = CE(template) - CE(gold at the own letter).
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from helpers import attack_settings, samples


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
