"""Every family adapter honours the same runner contract on its tiny random model."""

from __future__ import annotations

import pytest
import torch
from hf_test_helpers import FAMILIES, image_ref, pil, prompt_of

from facet_probe.runners.base import Request, Runner, generate_all

A, B, C = image_ref(48, 40, 1), image_ref(64, 30, 2), image_ref(36, 52, 3)


def _requests() -> list[Request]:
    """Varied lengths and image counts (0-3), so batches mix and need padding."""
    prompts = [prompt_of("Which animal is red?", A, "A cat B dog"),
               prompt_of("first", A, "second", B, "third", C, "Which image shows a dog? A B C"),
               prompt_of("No image here: is the answer yes or no?"),
               prompt_of(B, "Describe the picture in one word."),
               prompt_of("compare", C, "with", A, "A same B different"),
               prompt_of("a much longer question about the evidence chunk order and the document " * 3, B)]
    return [Request(key=f"r{i}", prompt=p) for i, p in enumerate(prompts)]


@pytest.mark.parametrize("family", FAMILIES)
def test_generates_text_for_image_and_text_prompts_with_provenance(make_runner, family):
    runner = make_runner(family)
    assert isinstance(runner, Runner)
    reqs = _requests()
    out = generate_all(runner, reqs)
    assert set(out) == {r.key for r in reqs}
    for req in reqs:
        resp = out[req.key]
        assert resp.error is None and isinstance(resp.text, str)
        prov = resp.provenance
        assert prov["attn_implementation"] == "sdpa" and prov["quantization"] == "none"
        assert prov["dtype"] == "float32" and prov["device"] == "cpu"
        assert prov["versions"]["transformers"] and prov["config_sha256"]
        assert prov["image_sha256"] == [im.sha256 for im in req.prompt.images()]
        assert 0 < resp.usage["completion_tokens"] <= 6 and resp.usage["prompt_tokens"] > 0


@pytest.mark.parametrize("family", FAMILIES)
def test_only_new_tokens_are_decoded(make_runner, family):
    runner = make_runner(family)
    req = _requests()[0]
    enc = runner.encode(req.prompt)
    text = generate_all(runner, [req])[req.key].text
    full = runner.generate_text(enc, runner.pixel_inputs(enc.images01), max_new_tokens=6)
    assert text == full.strip()  # the prompt is not echoed back
    assert "Which animal" not in text


@pytest.mark.parametrize("family", FAMILIES)
def test_images_sit_at_their_displayed_slots_in_display_order(make_runner, family):
    runner = make_runner(family)
    refs = [A, B, C]
    enc = runner.encode(prompt_of("alpha", A, "beta", B, "gamma", C, "delta"))
    decoded = runner.tokenizer.decode(enc.input_ids, skip_special_tokens=False)
    ph = {"qwen3_5": "<|image_pad|>", "qwen2_5_vl": "<|image_pad|>", "internvl": "<IMG_CONTEXT>",
          "gemma3": "<image_soft_token>", "llava": "<image>", "blip2": "<image>", "instructblip": "<image>",
          "idefics": "<image>"}[family]
    marks = [decoded.find(w) for w in ("alpha", "beta", "gamma", "delta")]
    runs = [decoded.find(ph, marks[i]) for i in range(3)]
    assert marks[0] < runs[0] < marks[1] < runs[1] < marks[2] < runs[2] < marks[3]
    # each image's pixels, in order, are exactly that image through the processor (none dropped or swapped)
    pixels = runner.pixel_inputs(enc.images01)["pixel_values"]
    one_by_one = torch.cat([runner.pixel_inputs(runner.encode(prompt_of("x", r)).images01)["pixel_values"]
                            for r in refs])
    assert len(enc.images01) == 3 and torch.equal(pixels, one_by_one)
    distinct = [runner.pixel_inputs(runner.encode(prompt_of("x", r)).images01)["pixel_values"] for r in (B, A, C)]
    assert not torch.equal(pixels, torch.cat(distinct))  # order matters: swapped images give other inputs


@pytest.mark.parametrize("family", FAMILIES)
def test_batched_generation_equals_batch_of_one(make_runner, family):
    reqs = _requests()
    batched = generate_all(make_runner(family, batch_size=4), reqs)
    serial = generate_all(make_runner(family, batch_size=1), reqs)
    assert {k: r.text for k, r in batched.items()} == {k: r.text for k, r in serial.items()}
    assert max(r.provenance["batch_size"] for r in batched.values()) > 1
    assert {r.provenance["batch_size"] for r in serial.values()} == {1}


def test_responses_stream_per_batch_in_completion_order(make_runner):
    runner = make_runner("llava", batch_size=2)
    stream = runner.generate(_requests())
    first = next(stream)  # available before the remaining batches run
    rest = list(stream)
    assert len(rest) == 5 and first[1].provenance["batch_size"] == 2
    longest = max(_requests(), key=lambda r: len(runner.encode(r.prompt)))
    assert first[0].key == longest.key  # longest prompts are grouped first


def test_a_prompt_that_cannot_be_encoded_becomes_an_error_response_not_a_lost_trial(make_runner, monkeypatch):
    runner = make_runner("llava", fresh=True)
    reqs = _requests()
    real = runner.encode
    monkeypatch.setattr(runner, "encode", lambda p, t=None, **kw: (_ for _ in ()).throw(ValueError("bad image"))
                        if p is reqs[2].prompt else real(p, t, **kw))
    out = generate_all(runner, reqs)
    assert len(out) == 6 and "bad image" in out["r2"].error and out["r2"].text == ""
    assert all(out[k].error is None for k in out if k != "r2")


def test_sampling_is_seeded_per_request_whatever_the_batch(make_runner):
    gen = {"max_new_tokens": 6, "temperature": 1.0, "top_p": 0.95}
    prompt = prompt_of("Which animal is red?", A, "A cat B dog")
    reqs = [Request(key=f"s{i}", prompt=prompt, seed=s) for i, s in enumerate((1, 2, 3, 4, 1))]
    batched = generate_all(make_runner("llava", generation=gen, batch_size=4), reqs)
    alone = generate_all(make_runner("llava", generation=gen, batch_size=1), reqs)
    assert {k: r.text for k, r in batched.items()} == {k: r.text for k, r in alone.items()}
    assert batched["s0"].text == batched["s4"].text  # same seed, same sample, even within one batch
    assert len({batched[f"s{i}"].text for i in range(4)}) > 1  # it really samples
    greedy = generate_all(make_runner("llava"), reqs[:1])["s0"].text
    assert batched["s0"].provenance["seed"] == 1 and any(r.text != greedy for r in batched.values())


def test_fingerprint_names_model_revision_dtype_quantisation_attention_and_generation(make_runner):
    fp = make_runner("qwen3_5").fingerprint()
    assert fp["model_id"] == "tiny/qwen3_5" and fp["dtype"] == "float32" and fp["quantization"] == "none"
    assert fp["attn_implementation"] == "sdpa" and fp["generation"]["max_new_tokens"] == 6  # as used, not "auto"
    assert fp["chat_template_options"] == {"enable_thinking": False} and "revision" in fp


def test_a_local_folder_is_named_by_the_digest_of_its_model_files_not_its_path(tiny_root, tmp_path):
    """Retrained weights at the same `local_path` get another fingerprint (no stored trial is reused); a
    model card or training log written beside them changes nothing."""
    import shutil

    from facet_probe.runners.hf.base import weights_digest
    from facet_probe.runners.hf.llava import LlavaRunner
    from facet_probe_dev.testing.tiny_models import retrain_in_place, tiny_model_path

    folder = shutil.copytree(tiny_model_path("llava", tiny_root), tmp_path / "digest_llava")  # its own: retrained
    runner = LlavaRunner(name="own", model_id="own/llava", local_path=str(folder), dtype="float32")
    assert "weights" not in runner.fingerprint()  # known once loaded
    runner.check_ready()
    first = runner.fingerprint()["weights"]
    assert first == weights_digest(folder) == runner.provenance["weights"] == runner.weights_id()
    (folder / "MODEL_CARD.md").write_text("# a card\n")
    (folder / "training_log.json").write_text("{}")
    assert weights_digest(folder) == first
    moved = shutil.copytree(folder, tmp_path / "digest_llava_moved")
    assert weights_digest(moved) == first  # the same weights elsewhere: the same name

    retrain_in_place(folder)
    retrained = LlavaRunner(name="own", model_id="own/llava", local_path=str(folder), dtype="float32")
    retrained.check_ready()
    assert retrained.fingerprint()["weights"] != first
    assert {k: v for k, v in retrained.fingerprint().items() if k != "weights"} == {
        k: v for k, v in runner.fingerprint().items() if k != "weights"}


def test_llava_loads_a_save_pretrained_folder_and_keeps_an_order_preserving_template(tmp_path):
    from facet_probe.runners.hf.llava import LLAVA15_TEMPLATE, LlavaRunner
    from facet_probe_dev.testing.tiny_models import build_llava

    folder = build_llava(tmp_path / "own_llava", chat_template=LLAVA15_TEMPLATE)
    runner = LlavaRunner(name="tiny_vlm", model_id="facet_probe/tiny-vlm", local_path=str(folder), dtype="float32",
                         generation={"max_new_tokens": 4})
    runner.check_ready()
    assert runner.provenance["chat_template"] == "checkpoint (tokenizer)"
    assert runner.encode(prompt_of("x", A, "y")).text.startswith("<s>")
    assert pil(A).size == (48, 40)
