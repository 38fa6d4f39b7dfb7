"""The IDEFICS adapter on its tiny random copy: the library processor's tokens, pixels and image mask, images
in display order, target tokens that see the image as generated ones do, and its model config."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from hf_test_helpers import image_ref, pil, prompt_of
from omegaconf import OmegaConf

import facet_probe
from facet_probe.runners.hf.idefics import FAKE_TOKEN, IMAGE_TOKEN, IdeficsRunner, packed_text

A, B, C = image_ref(48, 40, 1), image_ref(64, 30, 2), image_ref(36, 52, 3)


def _library_inputs(runner, enc, refs):
    """What `IdeficsProcessor` itself returns for the rendered prompt, its text pieces and images interleaved."""
    pieces = enc.text.split(IMAGE_TOKEN)
    sample = [pieces[0]]
    for ref, piece in zip(refs, pieces[1:], strict=True):
        sample += [pil(ref), piece]
    sample = [p for p in sample if not isinstance(p, str) or p.strip(" ")]
    return runner.processor(text=sample, add_end_of_utterance_token=False, return_tensors="pt")


@pytest.mark.parametrize("parts", [("first", A, "then", B, C, "and", A, "which?"),  # adjacent images
                                   ("no image at all, yes or no?",), (B, "describe it")])
def test_tokens_pixels_and_image_mask_equal_the_library_processor(make_runner, parts):
    runner = make_runner("idefics")
    refs = [p for p in parts if not isinstance(p, str)]
    enc = runner.encode(prompt_of(*parts))
    ref = _library_inputs(runner, enc, refs)
    assert torch.equal(enc.input_ids, ref["input_ids"][0])
    batch = runner._collate([enc], [runner._model_pixels(enc)], prompt_only=True)
    assert torch.equal(batch["image_attention_mask"].cpu(), ref["image_attention_mask"].long())
    torch.testing.assert_close(batch["pixel_values"].cpu(), ref["pixel_values"].float(), atol=2e-6, rtol=0)
    assert all(x.shape == (3, 32, 32) and x.min() >= 0 and x.max() <= 1 for x in enc.images01)


def test_a_text_piece_that_looks_like_a_url_is_text_not_a_download():
    """The library processor fetches any text piece that parses as a URL; ours keeps it as text."""
    text = "User:<image>https://example.com/x.png<image>ok"
    assert packed_text(text, "<s>") == (f"<s>User:{FAKE_TOKEN}{IMAGE_TOKEN}{FAKE_TOKEN}https://example.com/x.png"
                                        f"{FAKE_TOKEN}{IMAGE_TOKEN}{FAKE_TOKEN}ok")


def test_each_text_token_sees_the_image_shown_just_before_it(make_runner):
    runner = make_runner("idefics")
    enc = runner.encode(prompt_of("alpha", A, "beta", B, "gamma", C, "delta"))
    mask = runner._collate([enc], [runner._model_pixels(enc)], prompt_only=True)["image_attention_mask"][0]
    ids = enc.input_ids.tolist()
    seen = [int(row.argmax()) if row.any() else None for row in mask]
    image_at = [i for i, t in enumerate(ids) if t == runner.image_token_id()]
    assert len(image_at) == 3 and seen[:image_at[0]] == [None] * image_at[0]
    for k, (start, end) in enumerate(zip(image_at, [*image_at[1:], len(ids)], strict=True)):
        assert seen[start:end] == [k] * (end - start)  # image k's token and the text after it, up to the next


def test_images_are_attended_in_display_order(make_runner):
    runner = make_runner("idefics")
    prompt = prompt_of("alpha", A, "beta", B, "which one?")
    enc = runner.encode(prompt)
    last = [len(enc) - 1]
    with torch.no_grad():
        shown = runner.forward_logits(enc, runner.pixel_inputs(enc.images01), last)
        swapped = runner.forward_logits(enc, runner.pixel_inputs(enc.images01[::-1]), last)
        again = runner.forward_logits(runner.encode(prompt), runner.pixel_inputs(enc.images01), last)
    assert torch.equal(shown, again) and not torch.allclose(shown, swapped)


def test_pixel_gradients_flow_in_unit_pixel_space(make_runner):
    runner = make_runner("idefics")
    enc = runner.encode(prompt_of("look", A, "and", B, "answer"), target_text="The answer is (A).")
    xs = [x.clone().requires_grad_(True) for x in enc.images01]
    a, b = enc.target_span
    logits = runner.forward_logits(enc, runner.pixel_inputs(xs), list(range(a - 1, b - 1)))
    torch.nn.functional.cross_entropy(logits, enc.target_ids).backward()
    assert all(float(x.grad.abs().sum()) > 0 for x in xs)


def test_teacher_forced_target_logits_equal_the_generation_logits(make_runner):
    """Target tokens attend to the last image as generated tokens do, so scoring a reply by teacher forcing
    gives the logits `generate` computes while producing it."""
    runner = make_runner("idefics")
    enc = runner.encode(prompt_of("look", A, "then", B, "answer"), target_text="It is red. The answer is (A).")
    a, b = enc.target_span
    target = enc.target_ids.tolist()
    pixels = runner.pixel_inputs(enc.images01)
    with torch.no_grad():
        forced = runner.forward_logits(enc, pixels, list(range(a - 1, b - 1)))
        batch = runner._collate([enc], [pixels], prompt_only=True)
        out = runner.model.generate(**batch, max_new_tokens=len(target), min_new_tokens=len(target),
                                    do_sample=False, output_logits=True, return_dict_in_generate=True,
                                    prefix_allowed_tokens_fn=lambda _, ids: [target[len(ids) - a]])
    assert out.sequences[0, a:].tolist() == target
    torch.testing.assert_close(torch.cat(out.logits), forced, atol=1e-4, rtol=1e-4)


def test_generation_stops_at_end_of_utterance_and_never_emits_image_tokens(make_runner):
    runner = make_runner("idefics")
    cfg = runner._generation_config(runner.effective_generation())
    tok = runner.tokenizer
    assert tok.convert_tokens_to_ids("<end_of_utterance>") in runner._eos_ids(cfg)
    assert sorted(cfg.bad_words_ids) == sorted([[tok.convert_tokens_to_ids(IMAGE_TOKEN)],
                                                [tok.convert_tokens_to_ids(FAKE_TOKEN)]])
    assert runner.fingerprint()["stop_tokens"] == ["<end_of_utterance>"]


def test_the_model_config_names_idefics_9b_instruct_and_loads_a_local_copy(tiny_root):
    from hydra.utils import instantiate

    from facet_probe_dev.testing.tiny_models import tiny_model_path

    cfg = OmegaConf.load(Path(facet_probe.__file__).parent / "conf" / "model" / "idefics_9b_instruct.yaml")
    assert cfg.name == "idefics_9b_instruct" and cfg.model_id == "HuggingFaceM4/idefics-9b-instruct"
    runner = instantiate(cfg, local_path=str(tiny_model_path("idefics", tiny_root)), dtype="float32")
    assert isinstance(runner, IdeficsRunner) and runner.fingerprint()["runner"] == "hf/idefics"
    runner.check_ready()
    assert runner.provenance["chat_template"].startswith("checkpoint")


def test_a_batch_mixing_image_counts_scores_as_each_prompt_alone(make_runner):
    """Prompts with 0, 1 and 3 images share a forward: pixels are zero-padded to the most images and masked."""
    runner = make_runner("idefics")
    encs = [runner.encode(prompt_of(*parts), target_text="The answer is (B).")
            for parts in (("text only?",), (A, "one image"), ("three", A, B, "images", C, "?"))]
    pixels = [runner._model_pixels(e) for e in encs]
    positions = [list(range(e.target_span[0] - 1, e.target_span[1] - 1)) for e in encs]
    with torch.no_grad():
        together = runner.forward_logits_batch(encs, pixels, positions)
        alone = [runner.forward_logits(e, p, pos) for e, p, pos in zip(encs, pixels, positions, strict=True)]
    for a, b in zip(together, alone, strict=True):
        torch.testing.assert_close(a, b, atol=1e-4, rtol=1e-4)


@pytest.mark.slow  # 1.5 s or more: left out of `make test-fast`
def test_the_audit_runs_an_image_facet_on_the_tiny_idefics(tmp_path, tiny_root):
    import json

    import pandas as pd

    from facet_probe_dev.testing.in_process import run_module
    from facet_probe_dev.testing.tiny_models import tiny_model_path

    run = tmp_path / "run"
    proc = run_module("facet_probe", f"hydra.run.dir={run}", "progress=false", "model=idefics_9b_instruct",
                   f"model.local_path={tiny_model_path('idefics', tiny_root)}", "model.dtype=float32",
                   "model.generation.max_new_tokens=8", "facet=image_set_order", "dataset=synthetic_image_set",
                   "limit=2", "k=2", cwd=Path(facet_probe.__file__).parents[1])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (row,) = pd.read_csv(run / "summary.csv").to_dict("records")
    assert row["model"] == "idefics_9b_instruct" and row["facet"] == "image_set_order" and row["n_trials"] == 4
    trials = [json.loads(ln) for ln in (run / "trials.jsonl").read_text().splitlines() if ln]
    assert len(trials) == 4 and all(not t.get("error") for t in trials)
    shown = [t for t in trials if t.get("provenance", {}).get("image_tokens")]
    assert shown and all(len(t["provenance"]["image_tokens"]) > 1 for t in shown)  # several images per prompt


def test_a_checkpoint_without_a_chat_template_gets_the_instruct_conversation(tiny_root, tmp_path):
    import shutil

    from facet_probe.runners.hf.idefics import IDEFICS_TEMPLATE
    from facet_probe_dev.testing.tiny_models import tiny_model_path

    folder = Path(shutil.copytree(tiny_model_path("idefics", tiny_root), tmp_path / "no_template"))
    (folder / "chat_template.jinja").unlink()
    runner = IdeficsRunner(name="t", model_id="t/idefics", local_path=str(folder), dtype="float32")
    runner.check_ready()
    assert runner.provenance["chat_template"] == "facet_probe idefics (checkpoint has no chat template)"
    text = runner.render(prompt_of("Look:", A, "which colour?"))
    assert text == "System: Answer with the letter of the best option.<end_of_utterance>\n" \
                   f"User: Look:{IMAGE_TOKEN}which colour?<end_of_utterance>\nAssistant:"
    assert runner._template == IDEFICS_TEMPLATE
