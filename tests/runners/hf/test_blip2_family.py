"""The BLIP-2 family adapter (BLIP-2 with a Llama LM = MiniGPT-4's shape, InstructBLIP) on tiny offline copies."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from hf_test_helpers import image_ref, pil, prompt_of
from hydra.utils import instantiate
from omegaconf import OmegaConf

import facet_probe
from facet_probe.core.prompts import Message, Prompt, TextPart
from facet_probe.runners.base import Request, RunnerError, generate_all
from facet_probe.runners.hf.blip2 import MINIGPT4_SYSTEM, Blip2Runner, MiniGPT4Runner
from facet_probe_dev.testing.in_process import run_module
from facet_probe_dev.testing.tiny_models import tiny_model_path

ROOT = Path(__file__).resolve().parents[2]
CONF = Path(facet_probe.__file__).parent / "conf" / "model"
A, B = image_ref(48, 40, 1), image_ref(64, 30, 2)


def _runner(tiny_root, family: str, cls=Blip2Runner, **kw):
    runner = cls(name=f"tiny_{family}", model_id=f"tiny/{family}", local_path=str(tiny_model_path(family, tiny_root)),
                 dtype="float32", generation={"max_new_tokens": 6}, **kw)
    runner.check_ready()
    return runner


def _library_inputs(runner, folder: Path, text: str, images: list) -> dict:
    """The inputs transformers' own processor builds from the checkpoint folder (loaded afresh)."""
    from transformers import AutoImageProcessor, AutoTokenizer, Blip2Processor, InstructBlipProcessor

    tok, ip = AutoTokenizer.from_pretrained(folder), AutoImageProcessor.from_pretrained(folder, backend="pil")
    n = runner.model.config.num_query_tokens
    if (folder / "qformer_tokenizer").is_dir():
        proc = InstructBlipProcessor(image_processor=ip, tokenizer=tok, num_query_tokens=n,
                                     qformer_tokenizer=AutoTokenizer.from_pretrained(folder / "qformer_tokenizer"))
    else:
        proc = Blip2Processor(image_processor=ip, tokenizer=tok, num_query_tokens=n)
    return dict(proc(text=[text], images=images, return_tensors="pt"))


@pytest.mark.parametrize("family", ["blip2", "instructblip"])
def test_prefix_layout_equals_the_library_processor_and_model(tiny_root, family):
    """Token ids, Q-Former ids, pixels and the teacher-forced logits are the library's for the same prompt."""
    runner = _runner(tiny_root, family)
    enc = runner.encode(prompt_of("Which animal is red?", A, "A cat B dog"))
    text = "Answer with the letter of the best option.\nWhich animal is red?\nA cat B dog"  # the placeholder removed
    lib = _library_inputs(runner, tiny_model_path(family, tiny_root), text, [pil(A)])
    assert torch.equal(enc.input_ids, lib["input_ids"][0])
    assert enc.input_ids[:5].tolist() == [runner.model.config.image_token_id] * 4 + [runner.tokenizer.bos_token_id]
    ours = runner.pixel_inputs(enc.images01)
    torch.testing.assert_close(ours["pixel_values"], lib["pixel_values"].float(), atol=2e-6, rtol=0)
    if family == "instructblip":
        assert torch.equal(enc.extras["qformer_input_ids"], lib["qformer_input_ids"][0])
    positions = list(range(len(enc)))
    with torch.no_grad():
        expected = runner.model(**lib).logits[0]
        torch.testing.assert_close(runner.forward_logits(enc, ours, positions), expected, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("family", ["blip2", "instructblip"])
def test_the_pixel_gradient_flows_in_zero_one_pixel_space(tiny_root, family):
    runner = _runner(tiny_root, family)
    enc = runner.encode(prompt_of("Which animal is red?", A, "A cat B dog"), "The answer is (A).")
    x = enc.images01[0].clone().requires_grad_(True)
    assert x.shape == (3, 32, 32) and float(x.detach().min()) >= 0 and float(x.detach().max()) <= 1
    start, end = enc.target_span
    logits = runner.forward_logits(enc, runner.pixel_inputs([x]), list(range(start - 1, end - 1)))
    torch.log_softmax(logits, -1).gather(1, enc.target_ids[:, None]).sum().backward()
    assert x.grad is not None and float(x.grad.abs().sum()) > 0


def test_prefix_layout_refuses_several_images_per_trial_and_answers_the_rest(tiny_root):
    runner = _runner(tiny_root, "instructblip")
    reqs = [Request(key="one", prompt=prompt_of("Which?", A, "A B")), Request(key="none", prompt=prompt_of("Yes?")),
            Request(key="two", prompt=prompt_of("first", A, "second", B, "same?"))]
    out = generate_all(runner, reqs)
    assert out["one"].error is None and out["none"].error is None
    assert "takes one image per prompt and this prompt has 2" in out["two"].error
    assert "model.image_layout=slot" in out["two"].error and out["two"].text == ""


def test_slot_layout_is_minigpt4s_prompt_with_each_image_at_its_slot(tiny_root):
    runner = _runner(tiny_root, "blip2", MiniGPT4Runner)
    prompt = Prompt(system=None, messages=(Message("user", (TextPart("What is it?"),)),))
    assert runner.render(prompt) == f"{MINIGPT4_SYSTEM}###Human: What is it?###Assistant: "
    enc = runner.encode(prompt_of("first", A, "second", B, "same?"))
    assert enc.text == ("Answer with the letter of the best option.###Human: first<Img><ImageHere></Img> "
                        "second<Img><ImageHere></Img> same?###Assistant: ")
    tok, image = runner.tokenizer, [runner.model.config.image_token_id] * 4
    segments = enc.text.split("<ImageHere>")  # MiniGPT-4 tokenises each segment alone, BOS only on the first
    expected = (tok(segments[0], add_special_tokens=True)["input_ids"] + image
                + tok(segments[1], add_special_tokens=False)["input_ids"] + image
                + tok(segments[2], add_special_tokens=False)["input_ids"])
    assert enc.input_ids.tolist() == expected and runner.image_token_counts(enc) == [4, 4]
    assert expected[0] == tok.bos_token_id
    assert tok.convert_tokens_to_ids("###") in runner.model.generation_config.eos_token_id  # replies end at ###


def test_a_minigpt4_reply_ends_at_its_stop_text_however_it_is_spelt(tiny_root):
    """MiniGPT-4 keeps `output_text.split('###')[0]`; Vicuna writes '###' as one token or as '##' + '#'."""
    runner = _runner(tiny_root, "blip2", MiniGPT4Runner)
    tok, cfg = runner.tokenizer, runner.model.generation_config
    answer = tok("It is red. The answer is (A).", add_special_tokens=False)["input_ids"]
    rest = tok("Human: and then", add_special_tokens=False)["input_ids"]
    split = tok("##", add_special_tokens=False)["input_ids"] + tok("#", add_special_tokens=False)["input_ids"]
    one = tok("###", add_special_tokens=False)["input_ids"]
    assert len(one) == 1 and tok.decode(split) == "###"
    for stop in (one, split):
        assert runner._until_eos(torch.tensor(answer + stop + rest), cfg) == answer
    assert runner._until_eos(torch.tensor(answer + rest), cfg) == answer + rest
    assert cfg.stop_strings == ["###"]  # generation stops there too (StoppingCriteriaSub in MiniGPT-4)
    reply = generate_all(runner, [Request(key="r", prompt=prompt_of("What?", A))])["r"]
    assert reply.error is None and "###" not in reply.text


def test_instructblip_q_former_reads_the_last_128_tokens_of_the_instruction(tiny_root):
    long = prompt_of("the cat is red " * 100, A, "which one?")
    cut = _runner(tiny_root, "instructblip").encode(long).extras["qformer_input_ids"]
    full = _runner(tiny_root, "instructblip", qformer_max_tokens=None).encode(long).extras["qformer_input_ids"]
    assert len(cut) == 128 and len(full) > 400
    assert cut[0] == full[0] and torch.equal(cut[-20:], full[-20:])  # [CLS] kept, the end kept (LAVIS: left side cut)


def test_a_prompt_without_images_runs_the_language_model_alone(tiny_root):
    runner = _runner(tiny_root, "instructblip")
    enc = runner.encode(prompt_of("No image here: yes or no?"))
    assert not enc.images01 and runner.image_token_id() not in enc.input_ids.tolist()
    with torch.no_grad():
        lm = runner.model.language_model(input_ids=enc.input_ids[None]).logits[0]
        torch.testing.assert_close(runner.forward_logits(enc, {}, list(range(len(enc)))), lm)


def test_settings_are_checked_and_named_in_the_fingerprint(tiny_root):
    with pytest.raises(ValueError, match=r"image_layout must be one of \['prefix', 'slot'\]; got 'middle'"):
        Blip2Runner(name="x", model_id="x", image_layout="middle")
    with pytest.raises(ValueError, match="qformer_max_tokens must be >= 1"):
        Blip2Runner(name="x", model_id="x", qformer_max_tokens=0)
    fp = _runner(tiny_root, "blip2", MiniGPT4Runner).fingerprint()
    assert fp["runner"] == "hf/blip2" and fp["image_layout"] == "slot" and fp["prompt_format"] == "minigpt4_vicuna0"
    assert fp["stop_text"] == "###" and fp["weights"]
    with pytest.raises(RunnerError, match="python -m facet_probe.runners.hf.minigpt4_weights"):
        MiniGPT4Runner(name="minigpt4_vicuna_7b", model_id="Vision-CAIR/MiniGPT-4").check_ready()
    with pytest.raises(RunnerError, match="holds a 'llava' model, not one of the BLIP-2 family"):
        Blip2Runner(name="x", model_id="x", local_path=str(tiny_model_path("llava", tiny_root))).check_ready()


@pytest.mark.parametrize(("name", "cls", "layout", "max_new"), [
    ("instructblip_vicuna_7b", Blip2Runner, "prefix", 512), ("minigpt4_vicuna_7b", MiniGPT4Runner, "slot", 300),
    ("minigpt4_vicuna_13b", MiniGPT4Runner, "slot", 300)])
def test_configs_instantiate_the_adapter_with_the_paper_settings(name, cls, layout, max_new):
    runner = instantiate(OmegaConf.load(CONF / f"{name}.yaml"))
    assert type(runner) is cls and runner.name == name and runner.image_layout == layout
    assert runner.dtype == "bfloat16" and runner.generation["max_new_tokens"] == max_new  # 300: the reference's
    assert runner.generation["temperature"] == 0.0


@pytest.mark.slow
def test_the_audit_runs_on_a_tiny_instructblip_and_labels_multi_image_cells(tmp_path, tiny_root):
    folder = tiny_model_path("instructblip", tiny_root)
    proc = run_module("facet_probe", "model=instructblip_vicuna_7b", f"model.local_path={folder}", "model.dtype=float32",
                   "model.generation.max_new_tokens=8", f"hydra.run.dir={tmp_path}", "progress=false", "limit=1",
                   "k=2", cwd=ROOT)
    assert proc.returncode == 3, proc.stdout[-3000:] + proc.stderr[-3000:]  # incomplete: the multi-image cells
    assert "Traceback" not in proc.stderr
    trials = [json.loads(ln) for ln in (tmp_path / "trials.jsonl").read_text().splitlines()]
    failed = {t["facet"] for t in trials if t["error"]}
    assert failed == {"image_set_order", "mixed_modality_order"}  # the cells with several images per prompt
    assert all("takes one image per prompt" in t["error"] for t in trials if t["error"])
    answered = [t for t in trials if not t["error"]]
    assert {t["facet"] for t in answered} >= {"option_order", "evidence_chunk_order", "document_rank_order"}
    assert all(t["model"] == "instructblip_vicuna_7b" for t in trials)


def test_minigpt4s_unk_slots_are_never_padding_batched_calls_equal_one_at_a_time(tiny_root):
    """MiniGPT-4's folder marks its query slots with Vicuna's `<unk>`, and a Vicuna tokenizer may pad with `<unk>`:
    padding must not be taken for slots ("Number of elements of source < number of ones in mask"). Prompts of
    different lengths, batched (the default batch of 8), give what each gives alone: logits, replies, the audit."""
    runner = _runner(tiny_root, "minigpt4", MiniGPT4Runner)
    tok = runner.tokenizer
    assert tok.pad_token == "<unk>" and runner.image_token_id() == tok.unk_token_id == tok.pad_token_id
    assert runner.batch_size == 8
    prompts = [prompt_of("Which?", A, "A cat B dog"), prompt_of("Which animal in the picture is red?", B, "A B C"),
               prompt_of("first", A, "second", B, "same?"),
               prompt_of("Is the cat red or blue, and which of the following is the best answer?", A, "A B")]
    encs = [runner.encode(p) for p in prompts]
    assert len({len(e) for e in encs}) == len(encs)  # every row of a batch is padded but the longest
    pixels = [runner.pixel_inputs(e.images01) for e in encs]
    positions = [list(range(len(e))) for e in encs]
    with torch.no_grad():
        together = runner.forward_logits_batch(encs, pixels, positions)
        for row, e, p, pos in zip(together, encs, pixels, positions, strict=True):
            torch.testing.assert_close(row, runner.forward_logits(e, p, pos), atol=1e-5, rtol=1e-5)
    assert runner.generate_texts(encs, pixels, 6) == [runner.generate_text(e, p, 6)
                                                      for e, p in zip(encs, pixels, strict=True)]
    requests = [Request(key=str(i), prompt=p) for i, p in enumerate(prompts)]
    batched = generate_all(runner, requests)
    serial = generate_all(_runner(tiny_root, "minigpt4", MiniGPT4Runner, batch_size=1), requests)
    assert all(r.error is None for r in batched.values())
    assert {k: r.text for k, r in batched.items()} == {k: r.text for k, r in serial.items()}
    stray = generate_all(runner, [Request(key="t", prompt=prompt_of("What does <unk> mean?", A, "A B"))])["t"]
    assert "the prompt's text holds the image token '<unk>'" in stray.error  # text is never taken for a slot
