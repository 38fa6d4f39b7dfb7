"""A checkpoint and other harnesses' habits on the audit's command line (issue 63): `model=<hub id>` and
`--model hf --tasks mmlu --limit 5` are answered with the command to run, `model=hf` reads the family from the
checkpoint, and a tiny checkpoint given by path runs end to end (report and explorer included)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from facet_probe.app.boundary import by_reference_command
from facet_probe.app.other_harnesses import FLAGS, equivalent_command
from facet_probe.config.schema import asset_path
from facet_probe_dev.testing.in_process import run_module

ROOT = Path(__file__).resolve().parents[2]


def audit(*args: str):
    return run_module("facet_probe", *args, cwd=ROOT)


def one_error_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), stderr
    return lines[0]


def test_a_hub_id_as_the_model_is_answered_with_the_command_that_runs_it():
    proc = audit("model=Qwen/Qwen3.5-9B", "facet=option_order", "limit=5")
    assert proc.returncode == 2
    assert one_error_line(proc.stderr).endswith(
        "run: python -m facet_probe model=hf model.model_id=Qwen/Qwen3.5-9B facet=option_order limit=5")
    assert by_reference_command("dataset/org/data", ["dataset=org/data"], "python -m facet_probe") is None  # not a model


def test_model_hf_names_the_key_it_needs_and_an_unknown_family_in_one_line(tmp_path):
    proc = audit("model=hf", "facet=option_order", f"hydra.run.dir={tmp_path / 'a'}")
    assert proc.returncode == 2 and "model.model_id must be set" in one_error_line(proc.stderr)
    (tmp_path / "ckpt").mkdir()
    (tmp_path / "ckpt" / "config.json").write_text(json.dumps({"model_type": "mamba"}))
    proc = audit("model=hf", f"model.model_id={tmp_path / 'ckpt'}", "facet=option_order",
                 f"hydra.run.dir={tmp_path / 'b'}")
    assert proc.returncode == 2 and "'mamba' checkpoint" in one_error_line(proc.stderr)
    assert not (tmp_path / "b" / "trials.jsonl").exists()


def test_lm_eval_flags_are_answered_with_the_equivalent_key_value_command():
    proc = audit("--model", "hf", "--tasks", "mmlu", "--limit", "5")
    assert proc.returncode == 2
    assert ("the equivalent: python -m facet_probe model=hf 'model.model_id=<hub id or folder>' facet=option_order "
            "dataset=lm_eval dataset.task=mmlu limit=5 (docs/coming_from.md)") in one_error_line(proc.stderr)


@pytest.mark.parametrize(("argv", "equivalent", "dropped"), [
    (["--model", "hf", "--model_args", "pretrained=Qwen/Qwen3.5-9B,revision=abc,trust_remote_code=True",
      "--tasks", "arc_easy,mmlu", "--num_fewshot=5", "--batch_size", "auto", "--output_path", "out", "k=2"],
     "-m model=hf model.model_id=Qwen/Qwen3.5-9B model.revision=abc facet=option_order dataset=lm_eval "
     "dataset.task=arc_easy,mmlu hydra.run.dir=out k=2",
     ["--model_args trust_remote_code=True", "--num_fewshot", "--batch_size"]),
    (["--model", "hf/llava-hf/llava-1.5-7b-hf", "--limit", "0.5", "--log-dir", "logs", "--epochs", "3",
      "--gen_kwargs", "max_gen_toks=64"],
     "model=hf model.model_id=llava-hf/llava-1.5-7b-hf hydra.run.dir=logs repeats=3 "
     "model.generation.max_new_tokens=64", ["--limit"]),
])
def test_each_flag_becomes_its_setting_and_what_has_none_is_named(argv, equivalent, dropped):
    line = equivalent_command(argv)
    assert f"the equivalent: python -m facet_probe {equivalent}" in line
    kept = line.partition("not carried over: ")[2]
    assert all(d in kept for d in dropped) and kept.count("(") - kept.count("docs/") == len(dropped)


def test_hydra_s_own_flags_and_key_value_commands_are_left_to_hydra():
    for argv in (["--help"], ["--cfg", "job"], ["-m", "model=oracle", "limit=2"], ["--multirun", "seed=1,2"], []):
        assert equivalent_command(argv) is None
    assert not [flag for flag in FLAGS if flag in ("--help", "--cfg", "--multirun", "--run", "--info", "--resolve")]


@pytest.mark.slow  # one audit of the tiny VLM (about 3 s)
def test_a_checkpoint_folder_runs_end_to_end_under_its_family_with_report_and_explorer(tmp_path):
    folder = asset_path("tiny_vlm")  # a LLaVA checkpoint (config.json model_type llava), as save_pretrained writes it
    run = tmp_path / "run"
    proc = audit("model=hf", f"model.model_id={folder}", "facet=option_order", "dataset=synthetic_mcq", "limit=2",
                 "k=2", f"hydra.run.dir={run}", "progress=false")
    assert proc.returncode == 0, proc.stderr
    assert "_target_: facet_probe.runners.hf.llava.LlavaRunner" in (run / "config.yaml").read_text()
    model = json.loads((run / "run_status.json").read_text())["models"]["hf"]
    assert model["fingerprint"]["runner"] == "hf/llava" and model["fingerprint"]["model_id"] == folder
    assert model["called"] == 4 and model["errors"] == 0
    assert pd.read_csv(run / "summary.csv")[["facet", "n_items"]].to_dict("records") == [
        {"facet": "option_order", "n_items": 2}]
    assert (run / "report.md").stat().st_size and (run / "explorer.html").stat().st_size
