"""The bad-input corpus: each bad input, given to the real apps (run in this process by the shared `run_module`),
ends with ONE message that says what is wrong, where and what to do, exit code 2 and no traceback (or, where the
right outcome is a label, the label). `HYDRA_FULL_ERROR=1` shows the traceback.

Each case is a row of `CASES`: a short name, a function that builds the command line (and any files) in a fresh
folder, and the words the message must contain.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from PIL import Image

from facet_probe_dev.testing import in_process
from facet_probe_dev.testing.fake_providers import FakeProviderServer
from facet_probe_dev.testing.time_limit import time_limit

ROOT = Path(__file__).resolve().parents[2]
EXIT_USER_ERROR = 2


def run_module(module: str, *args: str, env: dict | None = None, cwd: Path = ROOT) -> in_process.Ran:
    """One app command in this process (the shared harness), offline, with no API key unless `env` gives one."""
    return in_process.run_module(module, *args, env=env, cwd=cwd)


def app_says(module: str, *args: str) -> tuple[int, str]:
    """`run_module` for the cases that read everything an app printed: (exit code, stdout then stderr); no traceback."""
    proc = run_module(module, *args)
    shown = proc.stdout + proc.stderr
    assert "Traceback" not in shown, shown
    return proc.returncode, shown


def audit_args(tmp: Path, *overrides: str) -> list[str]:
    return [f"hydra.run.dir={tmp / 'run'}", "progress=false", *overrides]


# ---------------------------------------------------------------- fixtures written per case

def item(i: int, **changes) -> dict:
    """A canonical MCQ line of the `mine` dataset."""
    row = {"item_id": f"mine::q{i}", "dataset": "mine", "question": f"Which is number {i}?",
           "choices": [f"{i}", f"{i + 1}", f"{i + 2}"], "gold_index": 0}
    row.update(changes)
    return {k: v for k, v in row.items() if v is not None}


def items_file(tmp: Path, lines: list[str]) -> Path:
    path = tmp / "items.jsonl"
    path.write_text("".join(line + "\n" for line in lines))
    return path


def jsonl(tmp: Path, *rows) -> list[str]:
    """Audit args on an items file of the given rows (a str row is written as is)."""
    path = items_file(tmp, [r if isinstance(r, str) else json.dumps(r) for r in rows])
    return audit_args(tmp, "model=oracle", "facet=option_order", "dataset=items_jsonl", f"dataset.path={path}")


def png(path: Path) -> Path:
    Image.new("RGB", (4, 4), "red").save(path, "PNG")
    return path


def image_item(tmp: Path, image: dict) -> list[str]:
    fixed = [{"id": "pic", "kind": "image", "image": image, "text": "a picture"}]
    return jsonl(tmp, item(1), item(2, fixed=fixed), item(3))


def synthetic(tmp: Path, *overrides: str) -> list[str]:
    return audit_args(tmp, "model=oracle", "facet=option_order", "dataset=synthetic_mcq", "limit=3", *overrides)


def a_run(tmp: Path, name: str = "run", model: str = "oracle", k: int = 2) -> Path:
    """A finished small run folder of `k` orderings per item (copied from one made once per session)."""
    folder = tmp / name
    shutil.copytree(_finished_run(model, k), folder)
    return folder


_RUNS: dict[tuple[str, int], Path] = {}


def _finished_run(model: str, k: int = 2) -> Path:
    if (model, k) not in _RUNS:
        import atexit
        import tempfile

        folder = Path(tempfile.mkdtemp(prefix="bad_input_run_")) / "run"
        atexit.register(shutil.rmtree, folder.parent, ignore_errors=True)  # made once per worker, gone with it
        dataset = "synthetic_dialog" if model == "free" else "synthetic_mcq"
        policy = "oracle"
        facet = "dialog_turn_order" if model == "free" else "option_order"
        proc = run_module("facet_probe", f"hydra.run.dir={folder}", "progress=false", f"model={policy}",
                       f"facet={facet}", f"dataset={dataset}", "limit=3", f"k={k}")
        assert proc.returncode == 0, proc.stderr
        _RUNS[model, k] = folder
    return _RUNS[model, k]


def corrupt_middle_line(tmp: Path) -> list[str]:
    run = a_run(tmp)
    lines = (run / "trials.jsonl").read_text().splitlines()
    lines[2] = lines[2][: len(lines[2]) // 2]
    (run / "trials.jsonl").write_text("\n".join(lines) + "\n")
    return [f"input={run}"]


def corrupt_middle_line_resume(tmp: Path) -> list[str]:
    run = a_run(tmp)
    lines = (run / "trials.jsonl").read_text().splitlines()
    lines[2] = lines[2][: len(lines[2]) // 2]
    (run / "trials.jsonl").write_text("\n".join(lines) + "\n")
    return [f"hydra.run.dir={run}", "progress=false", "model=oracle", "facet=option_order",
            "dataset=synthetic_mcq", "limit=3", "k=2"]


_IMMUTABLE: list[Path] = []


@pytest.fixture(autouse=True)
def _unlock_folders():
    """Make the read-only folders of a case writable again, so pytest can remove them."""
    yield
    while _IMMUTABLE:
        folder = _IMMUTABLE.pop()
        subprocess.run(["chattr", "-i", str(folder)], check=False, capture_output=True)  # a system tool, no app
        folder.chmod(stat.S_IRWXU)


def make_read_only(folder: Path) -> Path:
    """`folder`, which the process can no longer write in (root ignores modes, so it gets the immutable flag too)."""
    folder.chmod(stat.S_IRUSR | stat.S_IXUSR)
    _IMMUTABLE.append(folder)
    # chattr: a system tool, no app (the app itself runs in this process)
    if os.geteuid() == 0 and subprocess.run(["chattr", "+i", str(folder)], capture_output=True).returncode:
        pytest.skip("cannot make a folder read-only for root here")
    return folder


def read_only_output(tmp: Path) -> list[str]:
    """A folder the process cannot write in."""
    (tmp / "locked").mkdir()
    locked = make_read_only(tmp / "locked")
    return [f"hydra.run.dir={locked / 'run'}", "progress=false", "model=oracle", "facet=option_order",
            "dataset=synthetic_mcq", "limit=2"]


def folder_of_nothing(tmp: Path) -> list[str]:
    empty = tmp / "nothing"
    (empty / "sub").mkdir(parents=True)
    (empty / "sub" / "notes.txt").write_text("not a run")
    return [f"input={empty}"]


def judge_input(tmp: Path) -> list[str]:
    return [f"input={a_run(tmp, model='free')}", "judge=gemini_pro"]


# ---------------------------------------------------------------- the corpus

@dataclass(frozen=True)
class Case:
    name: str
    app: str  # the module run with `python -m`
    build: Callable[[Path], list[str]]  # tmp folder -> command-line arguments
    words: tuple[str, ...]  # what the message must contain (case-insensitive)


AUDIT, JUDGE, ODI, REPORT = "facet_probe", "facet_probe.judge", "facet_probe.odi", "facet_probe.report"

CASES = [
    # --- malformed items JSONL
    Case("jsonl_bad_json", AUDIT, lambda t: jsonl(t, item(1), '{"item_id": "mine::q2", ', item(3)),
         ("items.jsonl:2", "not valid json")),
    Case("jsonl_not_an_object", AUDIT, lambda t: jsonl(t, "[1, 2, 3]"), ("items.jsonl:1", "json object")),
    Case("jsonl_missing_question", AUDIT, lambda t: jsonl(t, item(1), item(2, question=None)),
         ("items.jsonl:2", "question")),
    Case("jsonl_missing_item_id", AUDIT, lambda t: jsonl(t, item(1, item_id=None)), ("items.jsonl:1", "item_id")),
    Case("jsonl_wrong_type_choices", AUDIT, lambda t: jsonl(t, item(1, choices=5)), ("items.jsonl:1", "choices")),
    Case("jsonl_wrong_type_gold_index", AUDIT, lambda t: jsonl(t, item(1, gold_index="first")),
         ("items.jsonl:1", "gold_index")),
    Case("jsonl_gold_index_out_of_range", AUDIT, lambda t: jsonl(t, item(1, gold_index=7)),
         ("items.jsonl:1", "gold_index 7")),
    Case("jsonl_duplicate_ids", AUDIT, lambda t: jsonl(t, item(1), item(2), item(1)),
         ("items.jsonl:3", "mine::q1", "repeats line 1")),
    Case("jsonl_empty_file", AUDIT, lambda t: jsonl(t), ("items.jsonl", "no items")),
    Case("jsonl_blank_lines_only", AUDIT, lambda t: jsonl(t, "", "   "), ("items.jsonl", "no items")),
    Case("jsonl_unknown_answer_type", AUDIT, lambda t: jsonl(t, item(1, answer_type="essay")),
         ("items.jsonl:1", "answer_type", "'mcq'")),
    Case("jsonl_bad_item_id_prefix", AUDIT, lambda t: jsonl(t, item(1, item_id="q1")),
         ("items.jsonl:1", "mine::")),
    Case("jsonl_path_does_not_exist", AUDIT,
         lambda t: audit_args(t, "model=oracle", "facet=option_order", "dataset=items_jsonl",
                              f"dataset.path={t / 'nope.jsonl'}"), ("nope.jsonl", "not found")),
    Case("jsonl_path_not_given", AUDIT,
         lambda t: audit_args(t, "model=oracle", "facet=option_order", "dataset=items_jsonl"),
         ("dataset.path=",)),
    Case("jsonl_unknown_dataset_option", AUDIT, lambda t: [*jsonl(t, item(1), item(2)), "+dataset.colour=red"],
         ("items_jsonl", "colour")),
    # --- images: fail at load, with the item id
    Case("image_missing", AUDIT, lambda t: image_item(t, {"path": "gone.png"}),
         ("items.jsonl:2", "mine::q2", "gone.png", "not found")),
    Case("image_corrupt_file", AUDIT,
         lambda t: (t / "broken.png").write_bytes(b"\x89PNG\r\n\x1a\nnot really") and image_item(
             t, {"path": "broken.png"}), ("mine::q2", "broken.png", "not a readable image")),
    Case("image_corrupt_inline", AUDIT,
         lambda t: image_item(t, {"data_b64": "bm90IGFuIGltYWdl"}), ("mine::q2", "not a readable image")),
    Case("image_sha_mismatch", AUDIT,
         lambda t: png(t / "pic.png") and image_item(t, {"path": "pic.png", "sha256": "0" * 64}),
         ("items.jsonl:2", "sha256", "does not match")),
    # --- unknown names
    Case("unknown_model", AUDIT, lambda t: synthetic(t, "model=nope"), ("model/nope", "oracle")),
    Case("unknown_facet", AUDIT, lambda t: audit_args(t, "model=oracle", "facet=nope"),
         ("facet/nope", "option_order")),
    Case("unknown_dataset", AUDIT, lambda t: audit_args(t, "model=oracle", "facet=option_order", "dataset=nope"),
         ("dataset/nope", "synthetic_mcq")),
    Case("unknown_experiment", AUDIT, lambda t: audit_args(t, "model=oracle", "experiment=nope"),
         ("experiment/nope", "offline")),
    Case("unknown_model_in_experiment", AUDIT,
         lambda t: audit_args(t, "model=oracle", "limit=2", "experiment.models=[oracle,nope]"),
         ("unknown model 'nope'", "always_first")),
    Case("unknown_judge", AUDIT, lambda t: synthetic(t, "judge=nope"), ("judge/nope", "gemini_pro")),
    Case("unknown_judge_in_judge_app", JUDGE, lambda t: [f"input={a_run(t)}", "judge=nope"],
         ("judge/nope", "gemini_pro")),
    Case("unknown_odi_preset", ODI, lambda t: [f"input={a_run(t)}", "odi=nope"], ("odi/nope", "default")),
    # --- misspelt overrides and bad values
    Case("misspelt_top_level_key", AUDIT, lambda t: synthetic(t, "kk=3"), ("kk",)),
    Case("misspelt_model_key", AUDIT, lambda t: synthetic(t, "+model.temprature=0.5"),
         ("oracle", "temprature")),
    Case("seed_not_a_number", AUDIT, lambda t: synthetic(t, "seed=abc"), ("seed", "abc")),
    Case("limit_negative", AUDIT, lambda t: synthetic(t, "limit=-1"), ("limit", "-1", ">= 1")),
    Case("limit_zero", AUDIT, lambda t: synthetic(t, "limit=0"), ("limit", ">= 1")),
    Case("k_zero", AUDIT, lambda t: synthetic(t, "k=0"), ("k", ">= 1")),
    Case("repeats_zero", AUDIT, lambda t: synthetic(t, "repeats=0"), ("repeats", ">= 1")),
    Case("bootstrap_negative", AUDIT, lambda t: synthetic(t, "bootstrap=-5"), ("bootstrap", ">= 1")),
    Case("shard_out_of_range", AUDIT, lambda t: synthetic(t, "store.shard=3/2"), ("store.shard", "3/2")),
    Case("shard_not_a_spec", AUDIT, lambda t: synthetic(t, "store.shard=x"), ("store.shard", "i/n")),
    Case("misspelt_hf_generation_key", AUDIT,  # transformers would drop it silently and decode greedily
         lambda t: synthetic(t, "model=tiny_vlm", "+model.generation.temprature=0.7"),
         ("temprature", "did you mean 'temperature'")),
    Case("model_local_path_missing", AUDIT,
         lambda t: synthetic(t, "model=tiny_vlm", f"model.local_path={t / 'no_weights'}"),
         ("no_weights", "local_path")),
    Case("data_root_missing", AUDIT,
         lambda t: audit_args(t, "model=oracle", "facet=option_order", "dataset=mmlu_pro", "limit=2",
                              f"data_root={t / 'no_data'}"), ("mmlu_pro", "no_data")),
    # --- trials and output folders
    Case("trials_corrupt_middle_line_report", REPORT, corrupt_middle_line, ("trials.jsonl:3", "malformed")),
    Case("trials_corrupt_middle_line_resume", AUDIT, corrupt_middle_line_resume, ("trials.jsonl:3",)),
    Case("read_only_output_folder", AUDIT, read_only_output, ("locked", "permission")),
    Case("folder_of_another_config", AUDIT,
         lambda t: [f"hydra.run.dir={a_run(t)}", "progress=false", "model=oracle", "facet=option_order",
                    "dataset=synthetic_mcq", "limit=3", "k=3"], ("other settings", "k: 2 -> 3", "hydra.run.dir")),
    # --- judge, ODI and report apps
    Case("judge_without_key", JUDGE, judge_input, ("no api key", "GOOGLE_API_KEY")),
    Case("required_model_setting_not_given", AUDIT,
         lambda t: audit_args(t, "model=openai_compat", "facet=option_order", "dataset=synthetic_mcq", "limit=3"),
         ("model.model_id", "must be set", "model.model_id=<value>")),
    # Hydra makes the judge's log folder (hydra.run.dir=${input}) before the app runs, so it finds it empty
    Case("judge_input_missing", JUDGE, lambda t: [f"input={t / 'nope'}", "judge=gemini_pro"], ("nope", "neither")),
    Case("judge_folder_of_nothing", JUDGE, lambda t: [*folder_of_nothing(t), "judge=gemini_pro"],
         ("nothing", "neither")),
    Case("judge_given_a_trials_file", JUDGE, lambda t: [f"input={a_run(t) / 'trials.jsonl'}", "judge=gemini_pro"],
         ("trials.jsonl", "run folder")),
    Case("odi_unknown_prior", ODI, lambda t: [f"input={a_run(t)}", "+odi.priors.slope_sd=2", "dry_run=true"],
         ("odi", "slope_sd")),
    Case("odi_input_missing", ODI, lambda t: [f"input={t / 'nope'}", "dry_run=true"], ("nope", "no such run folder")),
    Case("odi_folder_of_nothing", ODI, lambda t: [*folder_of_nothing(t), "dry_run=true"], ("nothing", "neither")),
    Case("odi_bad_outcome", ODI, lambda t: [f"input={a_run(t)}", "outcome=best", "dry_run=true"],
         ("outcome", "best", "modal")),
    Case("odi_advi_through_jax", ODI, lambda t: [f"input={a_run(t)}", "odi.sampler=advi", "odi.pytensor_mode=jax",
                                                 "dry_run=true"], ("pytensor_mode=jax", "advi", "fast_compile")),
    Case("report_folder_of_nothing", REPORT, folder_of_nothing, ("nothing", "neither")),
    # --- settings added in the fidelity / scale batch
    Case("store_group_of_no_trials", AUDIT,
         lambda t: audit_args(t, "model=oracle", "facet=option_order", "dataset=synthetic_mcq", "store.group_trials=0"),
         ("store.group_trials=0", "group_trials >= 1")),
    Case("policy_given_a_temperature", AUDIT,
         lambda t: audit_args(t, "model=oracle", "facet=option_order", "dataset=synthetic_mcq",
                              "+model.generation.temperature=0.7"), ("reference policy", "model=tiny_vlm")),
    Case("paper_input_missing", "facet_probe.paper", lambda t: [f"input={t / 'nope'}", f"out={t / 'out'}"],
         ("nope", "does not exist")),
]


def test_the_corpus_has_at_least_35_cases_with_unique_names():
    names = [c.name for c in CASES]
    assert len(names) >= 35 and len(set(names)) == len(names)


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_bad_input_gives_one_clear_message_and_exit_code_2(case, tmp_path):
    proc = run_module(case.app, *case.build(tmp_path))
    message = proc.stderr.lower()
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.returncode == EXIT_USER_ERROR, (proc.returncode, proc.stdout[-2000:], proc.stderr)
    missing = [w for w in case.words if w.lower() not in message]
    assert not missing, f"{missing} not in:\n{proc.stderr}"


def test_bad_images_fail_before_any_trial(tmp_path):
    proc = run_module(AUDIT, *image_item(tmp_path, {"data_b64": "bm90IGFuIGltYWdl"}))
    assert proc.returncode == EXIT_USER_ERROR
    assert not (tmp_path / "run" / "trials.jsonl").exists()


def test_hydra_full_error_shows_the_traceback(tmp_path):
    # in-process is faithful: the apps read HYDRA_FULL_ERROR when they fail (core.console.full_errors), not at start
    proc = run_module(AUDIT, *synthetic(tmp_path, "limit=-1"), env={"HYDRA_FULL_ERROR": "1"})
    assert proc.returncode != 0
    assert "Traceback" in proc.stderr


# ---------------------------------------------------------------- explicit labels and folders of runs

def openai_compat(tmp: Path, server: FakeProviderServer, *overrides: str) -> list[str]:
    return synthetic(tmp, "model=openai_compat", f"model.base_url={server.url}/v1", "model.model_id=served",
                     "model.verify_model=false", "model.concurrency.max_retries=0",
                     "model.concurrency.backoff_base_s=0.01", *overrides)


@pytest.mark.slow
def test_an_empty_reply_is_a_parse_error_trial_not_a_crash(tmp_path):
    with FakeProviderServer(reply=lambda call: "") as server:
        proc = run_module(AUDIT, *openai_compat(tmp_path, server))
    assert "Traceback" not in proc.stderr, proc.stderr
    trials = [json.loads(line) for line in (tmp_path / "run" / "trials.jsonl").read_text().splitlines()]
    assert trials and all(t["parse_status"] == "parse_error" and t["error"] is None for t in trials)
    assert proc.returncode == 0


def test_no_successful_trial_is_one_clear_message(tmp_path):
    with FakeProviderServer(faults={"bad_request": 1.0}) as server:
        proc = run_module(AUDIT, *openai_compat(tmp_path, server))
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.returncode == EXIT_USER_ERROR
    message = proc.stderr.lower()
    assert "no successful trial" in message and "re-run" in message


def test_an_unknown_generation_key_is_refused_naming_the_valid_ones(tmp_path):
    with FakeProviderServer() as server:
        proc = run_module(AUDIT, *openai_compat(tmp_path, server, "+model.generation.temprature=0.5"))
        assert not server.calls
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.returncode == EXIT_USER_ERROR
    for word in ("temprature", "temperature", "model.extra_body"):
        assert word in proc.stderr


@pytest.mark.slow
def test_model_extra_body_sends_deliberate_extras(tmp_path):
    with FakeProviderServer() as server:
        proc = run_module(AUDIT, *openai_compat(tmp_path, server, "+model.extra_body.top_k=20"))
        bodies = [c.body for c in server.calls]
    assert proc.returncode == 0, proc.stderr
    assert bodies and all(b.get("top_k") == 20 for b in bodies)


def test_an_unknown_anthropic_generation_key_is_refused(tmp_path):
    with FakeProviderServer() as server:
        proc = run_module(AUDIT, *synthetic(tmp_path, "model=claude_sonnet_46", f"model.base_url={server.url}",
                                         "+model.generation.top_kk=5"),
                       env={"ANTHROPIC_API_KEY": "sk-ant-test-key-0123456789"})
        assert not server.calls
    assert proc.returncode == EXIT_USER_ERROR, proc.stderr
    assert "top_kk" in proc.stderr and "max_tokens" in proc.stderr


def runs_under(tmp: Path) -> Path:
    """outputs/<model>/<scope>/<mode> with two run folders, as the audit lays them out."""
    root = tmp / "outputs" / "oracle"
    for scope in ("a", "b"):
        (root / scope).mkdir(parents=True)
        shutil.copytree(_finished_run("oracle"), root / scope / "direct-k2-seed42")
    return root


def test_odi_expands_a_folder_of_run_folders(tmp_path):
    root = runs_under(tmp_path)
    proc = run_module(ODI, f"input={root}", "dry_run=true")
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout[proc.stdout.index("{"):])
    assert sorted(Path(p).parent.name for p in summary["inputs"]) == ["a", "b"]


def test_report_expands_a_folder_of_run_folders(tmp_path):
    root = runs_under(tmp_path)
    proc = run_module(REPORT, f"input={root}", f"out={tmp_path / 'rep'}", "bootstrap=10")
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "rep" / "summary.csv").is_file()
    assert "6 trials" not in proc.stdout  # both runs, not one: 2 x 3 items x 2 orderings
    assert "12 trials" in proc.stdout


@pytest.mark.slow  # 1.5 s or more: left out of `make test-fast`
def test_judge_expands_a_folder_of_run_folders(tmp_path):
    root = tmp_path / "outputs" / "oracle"
    for scope in ("a", "b"):
        (root / scope).mkdir(parents=True)
        shutil.copytree(_finished_run("free"), root / scope / "direct-k2-seed42")
    with FakeProviderServer(reply=lambda call: "A") as server:
        proc = run_module(JUDGE, f"input={root}", "judge=gpt_54_mini", f"judge.runner.base_url={server.url}/v1",
                       env={"OPENAI_API_KEY": "sk-openai-test-key-0123456789"})
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.returncode == 0, proc.stderr
    for scope in ("a", "b"):
        assert (root / scope / "direct-k2-seed42" / "semantic_flip.csv").is_file()


# ---------------------------------------------------------------- issue 43 (2, 3, 4, 8, 9, 11): in-process, no call

def audit_here(*args: str, never: tuple[str, ...] = ()) -> tuple[int, str]:
    """The audit in this process (`run_module`): (exit code, its `error:` lines); no traceback, and none of the
    strings `never` (secrets) anywhere in its output."""
    proc = run_module(AUDIT, *args)
    assert "Traceback" not in proc.stderr, proc.stderr
    assert not [s for s in never if s in proc.stdout + proc.stderr], proc.stdout + proc.stderr
    return proc.returncode, "\n".join(line for line in proc.stderr.splitlines() if line.startswith("error: "))


def latin1_line(tmp: Path) -> list[str]:
    path = tmp / "items.jsonl"
    path.write_bytes((json.dumps(item(1)) + "\n").encode()
                     + json.dumps(item(2, question="Caf\u00e9?"), ensure_ascii=False).encode("latin-1") + b"\n")
    return audit_args(tmp, "model=oracle", "facet=option_order", "dataset=items_jsonl", f"dataset.path={path}")


def png_claiming_40000_squared(tmp: Path) -> list[str]:
    """A 60-byte PNG whose header claims 40000 x 40000 pixels (Pillow's DecompressionBombError on opening)."""
    from tests.core.test_items import png_claiming

    (tmp / "big.png").write_bytes(png_claiming(40000, 40000))
    return image_item(tmp, {"path": "big.png"})


CASES_43 = [
    Case("jsonl_not_utf8", AUDIT, latin1_line,
         ("items.jsonl:2", "not valid utf-8", "byte 0xe9 at byte offset", "save the file as utf-8")),
    Case("image_decompression_bomb", AUDIT, png_claiming_40000_squared,
         ("mine::q2", "component 'pic'", "big.png", "1,600,000,000 pixels", "resize the image")),
    Case("jsonl_duplicate_choices", AUDIT, lambda t: jsonl(t, item(1), item(2, choices=["same", "same", "other"])),
         ("items.jsonl:2", "mine::q2", "'same' 2 times", "dataset.duplicate_choices=keep")),
    Case("jsonl_gold_index_boolean", AUDIT, lambda t: jsonl(t, item(1, gold_index=True)),
         ("items.jsonl:1", "gold_index", "got true (a boolean)")),
    Case("jsonl_gold_index_float", AUDIT, lambda t: jsonl(t, item(1, gold_index=1.0)),
         ("items.jsonl:1", "gold_index", "got 1.0 (float)")),
    Case("k_beyond_any_run_folder", AUDIT, lambda t: synthetic(t, "k=1000000000000"),
         ("k=1,000,000,000,000", "at most 1,000,000")),
    Case("k_beyond_these_items", AUDIT, lambda t: synthetic(t, "k=400000"),
         ("k=400,000", "at most k=333,333", "option_order/synthetic_mcq 24 (4 components)", "limit=")),
    Case("k_beyond_an_items_orderings", AUDIT,
         lambda t: [*jsonl(t, item(1, choices=[f"o{i}" for i in range(8)])), "k=40321"],
         ("at most k=40,320", "mine::q1 has 8 components", "40,320 distinct orderings")),
]


@pytest.mark.parametrize("case", CASES_43, ids=lambda c: c.name)
def test_bad_input_43_is_one_line_exit_2_before_any_trial(case, tmp_path):
    with time_limit(60, case.name):  # k_beyond_*: a check that breaks draws orderings for ever, not hang the suite
        code, error = audit_here(*case.build(tmp_path))
    assert code == EXIT_USER_ERROR and error.count("\n") == 0, error
    missing = [w for w in case.words if w.lower() not in error.lower()]
    assert not missing, f"{missing} not in:\n{error}"
    assert not (tmp_path / "run" / "trials.jsonl").exists()


@pytest.mark.parametrize("seed", [-1, 2**64 + 1])
def test_a_seed_no_run_can_store_is_refused_before_any_paid_call(seed, tmp_path):
    """seed=-1 had every trial called (paid) before the report failed; a seed past 2**64 failed in the manifest."""
    with FakeProviderServer() as server:
        code, error = audit_here(*openai_compat(tmp_path, server, f"seed={seed}"))
        assert not server.calls
    assert code == EXIT_USER_ERROR and error == f"error: seed={seed}: need 0 <= seed < 2**63 (a seed is stored as " \
                                                "a 64-bit integer), e.g. seed=42 (the default)"
    assert not (tmp_path / "run" / "trials.jsonl").exists()


# ---------------------------------------------------------------- issue 43 (1, 7, 12): what Hydra refuses, one line

def split_run_dir(tmp: Path) -> list[str]:
    """`hydra.run.dir=/tmp/.../my run` unquoted in the shell: Hydra gets `hydra.run.dir=/tmp/.../my` and `run`."""
    return ["model=oracle", f"hydra.run.dir={tmp}/my", "run", "progress=false"]


def broken_user_experiment(tmp: Path) -> list[str]:
    """A user's experiment on hydra.searchpath whose YAML does not parse (line 3 indented off its mapping)."""
    (tmp / "conf" / "experiment").mkdir(parents=True)
    (tmp / "conf" / "experiment" / "mine.yaml").write_text("panel:\n  - model: oracle\n   facet: option_order\n")
    return [f"hydra.searchpath=[file://{tmp / 'conf'}]", "experiment=mine", f"hydra.run.dir={tmp / 'run'}"]


#: (name, the command line in a fresh folder, the one line expected, the value Hydra reads from the quoted form
#: shown), "{tmp}" standing for the folder
HYDRA_REFUSES_43 = [
    ("url_with_an_unquoted_query_key",
     lambda t: ["model=openai_compat", "model.model_id=m", "model.base_url=http://u:pw9q@127.0.0.1:9/v1?api_key=sk-9q"],
     "error: cannot read the override 'model.base_url=http://u:***@127.0.0.1:9/v1?api_key=***' (mismatched input "
     "'=' expecting <EOF>); quote the value: \"model.base_url='http://u:***@127.0.0.1:9/v1?api_key=***'\" (with "
     "your secret in place of ***)", "http://u:***@127.0.0.1:9/v1?api_key=***"),
    ("run_dir_split_at_a_space", split_run_dir,
     "error: cannot read the override 'run' (not key=value); if it is the rest of the value of hydra.run.dir= that "
     "the shell split at a space, quote the value: \"hydra.run.dir='{tmp}/my run'\"", "{tmp}/my run"),
    ("run_dir_with_a_space_and_a_hash", lambda t: ["model=oracle", f"hydra.run.dir={t}/my run #2"],
     "error: cannot read the override 'hydra.run.dir={tmp}/my run #2' (a character Hydra's override grammar takes "
     "only in a quoted value); quote the value: \"hydra.run.dir='{tmp}/my run #2'\"", "{tmp}/my run #2"),
    ("experiment_yaml_broken", broken_user_experiment,
     "error: {tmp}/conf/experiment/mine.yaml:3:4: not valid YAML (expected <block end>, but found '<block mapping "
     "start>', while parsing a block collection at line 2); fix that line and re-run (the keys of one mapping "
     "indented alike, a value holding ': ' or ' #' quoted)", None),
]


@pytest.mark.parametrize(("build", "expected", "value"), [c[1:] for c in HYDRA_REFUSES_43],
                         ids=[c[0] for c in HYDRA_REFUSES_43])
def test_what_hydra_refuses_is_one_line_with_the_fix(build, expected, value, tmp_path):
    """An override Hydra's grammar refuses says to quote the value, showing the quoted form (secrets masked); a
    user's config file YAML cannot read names its file and line. Exit 2, no traceback, nothing written."""
    import shlex

    from hydra.core.override_parser.overrides_parser import OverridesParser

    code, error = audit_here(*build(tmp_path), never=("pw9q", "sk-9q"))
    assert code == EXIT_USER_ERROR and error == expected.format(tmp=tmp_path)
    if value is not None:  # the shell and Hydra read the form shown as one override holding the whole value
        shown = shlex.split(error.split("quote the value: ")[1].split(" (with")[0])
        assert len(shown) == 1 and OverridesParser.create().parse_override(shown[0]).value() == value.format(tmp=tmp_path)
    assert not list(tmp_path.rglob("trials.jsonl"))


# ---------------------------------------------------------------- issue 43 (6, 10): a damaged run folder

#: the command that made `a_run`'s folder: run again into it, it resumes
RESUME = ("progress=false", "model=oracle", "facet=option_order", "dataset=synthetic_mcq", "limit=3", "k=2")


def with_line(path: Path, at: int, line: str) -> None:
    """Put `line` in the file as its line `at` (1-based), the others kept as they are."""
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join([*lines[: at - 1], line + "\n", *lines[at - 1:]]))


def damaged(name: str, damage: Callable[[Path], None]) -> Callable[[Path], Path]:
    def build(tmp: Path) -> Path:
        run = a_run(tmp)
        damage(run / name)
        return run
    return build


#: (name, app, how the finished run folder is damaged, audit (resume into it) or report (input=it), the words)
DAMAGED_RUNS_43 = [
    ("identity_not_json", damaged("run_identity.json", lambda p: p.write_text('{"settings": {"k": 2,\n')),
     AUDIT, ("run_identity.json:2:1", "not valid json", "delete it and re-run", "stored trials are kept")),
    ("identity_a_list", damaged("run_identity.json", lambda p: p.write_text("[1, 2]\n")),
     AUDIT, ("run_identity.json:1", "a json array", "delete it and re-run")),
    ("status_not_json", damaged("run_status.json", lambda p: p.write_bytes(p.read_bytes()[:40])),
     REPORT, ("run_status.json:", "not valid json", "re-run the audit command into this folder",
                  "or delete it")),
    ("manifest_truncated_audit", damaged("manifest.parquet", lambda p: p.write_bytes(p.read_bytes()[:300])),
     AUDIT, ("manifest.parquet", "not a readable parquet file", "delete it and re-run", "fresh folder")),
    ("manifest_truncated_report", damaged("manifest.parquet", lambda p: p.write_bytes(p.read_bytes()[:300])),
     REPORT, ("manifest.parquet", "not a readable parquet file", "delete it and re-run")),
    ("run_items_not_json", damaged("items.jsonl", lambda p: with_line(p, 2, '{"dataset": "synthetic_mcq", "item')),
     REPORT, ("items.jsonl:2:30", "not valid json (unterminated string", "re-run the audit command into this folder",
                  "or fix that line")),
    ("run_items_a_list", damaged("items.jsonl", lambda p: with_line(p, 2, '["synthetic_mcq", 1]')),
     REPORT, ("items.jsonl:2:", "not an item record (a json array)")),
    ("trials_line_a_list_report", damaged("trials.jsonl", lambda p: with_line(p, 3, "[1, 2]")),
     REPORT, ("trials.jsonl:3:", "not a trial record (a json array)", "delete that line")),
    ("trials_line_a_list_audit", damaged("trials.jsonl", lambda p: with_line(p, 3, "[1, 2]")),
     AUDIT, ("trials.jsonl:3:", "not a trial record (a json array)", "delete that line")),
    ("trials_line_not_a_trial_report", damaged("trials.jsonl", lambda p: with_line(p, 3, '{"note": "by hand"}')),
     REPORT, ("trials.jsonl:3:", "not a trial record (a json object without 'facet'", "delete that line")),
    ("trials_line_not_a_trial_audit", damaged("trials.jsonl", lambda p: with_line(p, 3, '{"note": "by hand"}')),
     AUDIT, ("trials.jsonl:3:", "not a trial record (a json object without 'trial_key'", "delete that line")),
]


@pytest.mark.slow
@pytest.mark.parametrize(("build", "app", "words"), [c[1:] for c in DAMAGED_RUNS_43],
                         ids=[c[0] for c in DAMAGED_RUNS_43])
def test_a_damaged_run_folder_is_one_line_naming_the_file_and_line(build, app, words, tmp_path):
    """A damaged record of a run folder (its settings, status, manifest, items, a trials line that is JSON but
    no trial) is one `error:` line naming the file (and line) and what to do; exit 2; the trials untouched."""
    run = build(tmp_path)
    stored = (run / "trials.jsonl").read_bytes()
    args = [f"hydra.run.dir={run}", *RESUME] if app == AUDIT else [f"input={run}", f"out={tmp_path / 'rep'}"]
    code, err = app_says(app, *args)
    error = [line for line in err.splitlines() if line.startswith("error: ")]
    assert code == EXIT_USER_ERROR and len(error) == 1, err
    missing = [w for w in words if w.lower() not in error[0].lower()]
    assert not missing, f"{missing} not in:\n{error[0]}"
    assert (run / "trials.jsonl").read_bytes() == stored


def test_a_png_given_as_input_is_one_line(tmp_path):
    code, err = app_says(REPORT, f"input={png(tmp_path / 'plot.png')}", f"out={tmp_path / 'rep'}")
    assert code == EXIT_USER_ERROR and err.count("error: ") == 1, err
    assert f"error: {tmp_path / 'plot.png'}:1: not a trials file" in err and "give a run folder" in err


def test_a_report_missing_expected_trials_exits_3(tmp_path):
    """A run folder whose trials are fewer than its manifest asks: the report is written and says how many are
    missing, with the exit code of an incomplete run (3, as the README says), not 0."""
    run = a_run(tmp_path)
    lines = (run / "trials.jsonl").read_text().splitlines(keepends=True)
    (run / "trials.jsonl").write_text("".join(lines[1:]))
    code, err = app_says(REPORT, f"input={run}", f"out={tmp_path / 'rep'}")
    assert code == 3, err
    assert "incomplete: 1 expected trials are missing" in err and "re-run the audit command" in err
    assert (tmp_path / "rep" / "summary.csv").is_file()


def test_the_audit_resumes_over_a_damaged_run_status(tmp_path):
    """Nothing in run_status.json is needed to resume: the audit says which line is damaged, writes the file
    again and completes, the stored trials kept (none called again)."""
    run = a_run(tmp_path)
    (run / "run_status.json").write_text('{"state": "running",\n "models": {\n')
    stored = (run / "trials.jsonl").read_bytes()
    code, out = app_says(AUDIT, f"hydra.run.dir={run}", *RESUME)
    assert code == 0, out
    assert f"{run / 'run_status.json'}:3:1: not valid JSON" in out and "this run writes it again" in out
    assert json.loads((run / "run_status.json").read_text())["models"]["oracle"]["called"] == 0
    assert (run / "trials.jsonl").read_bytes() == stored


# ---------------------------------------------------------------- issue 43 (4): every app's seed, one line

PAPER = "facet_probe.paper"
#: (app, its seed key, its default, whether it reads a run folder): every app that takes a seed
SEEDED_APPS = [(REPORT, "seed", 0, True), (PAPER, "seed", 0, True), (ODI, "odi.seed", 0, True),
               ("facet_probe.decoder", "seed", 42, True), ("facet_probe.attack", "seed", 0, False)]


@pytest.mark.parametrize("seed", [-1, 2**64 + 1])
@pytest.mark.parametrize(("app", "key", "default", "reads_a_run"), SEEDED_APPS,
                         ids=[app[0].split(".")[-1] for app in SEEDED_APPS])
def test_every_app_refuses_a_seed_out_of_range_in_one_line(app, key, default, reads_a_run, seed, tmp_path):
    """`seed=-1` was numpy's traceback (`expected non-negative integer`, exit 1) in the report and the paper:
    every app that takes a seed refuses it as the audit does (`config.check_seeds`), before it reads or writes."""
    run = a_run(tmp_path) if reads_a_run else None
    stored = run and (run / "trials.jsonl").read_bytes()
    where = ([f"input={run}", f"out={tmp_path / 'out'}"] if reads_a_run  # the attack: a short one if it starts
             else [f"out_root={tmp_path / 'out'}", "limit=1", "attack.steps=1"])
    with time_limit(120, f"{key}={seed}"):  # a seed not refused starts the work (an attack, a fit)
        code, err = app_says(app, f"{key}={seed}", *where)
    assert code == EXIT_USER_ERROR, err
    assert [line for line in err.splitlines() if line.startswith("error: ")] == [
        f"error: {key}={seed}: need 0 <= {key} < 2**63 (a seed is stored as a 64-bit integer), e.g. {key}={default} "
        "(the default)"], err
    assert not (tmp_path / "out").exists()
    assert run is None or ((run / "trials.jsonl").read_bytes() == stored and not (run / "odi").exists())


# ---------------------------------------------------------------- issue 43 follow-ups: K the targets and ODI need

def test_a_paper_target_of_k_3_over_a_k_2_run_says_so_in_one_line(tmp_path):
    """Table 4's policies (P3 is a majority of 3) over a K=2 run raised KeyError 'flip_k3': one line alone, a
    skipped target (the reason said) in the whole paper build, whose other targets are written."""
    run = a_run(tmp_path)
    code, err = app_says(PAPER, f"input={run}", "target=table4-mitigation", f"out={tmp_path / 'one'}")
    need = ("P1-P6 need K >= 3 orderings per cell (P3 is a majority of 3); 1 cell(s) of K=2 left out: run the audit "
            "with k=6 (the paper's K)")
    assert code == EXIT_USER_ERROR and [line for line in err.splitlines() if line.startswith("error: ")] == [
        f"error: {need}"], err
    code, out = app_says(PAPER, f"input={run}", "bootstrap=10", "mechanism.judges=[]", f"out={tmp_path / 'all'}")
    assert code == 0, out
    assert f"table4-mitigation: skipped ({need})" in out and f"fig-pareto: skipped ({need})" in out
    assert (tmp_path / "all" / "table_k_ablation.csv").is_file() and (tmp_path / "all" / "table1.csv").is_file()


def test_odi_simulation_refuses_more_orderings_than_its_components_have():
    """Past 7 components the grammar draws distinct orderings: `SimSpec(n_components=8, n_orderings=40321)`
    drew for ever; the spec refuses it in one line, as its other settings, before any item is drawn."""
    from facet_probe.odi.simulate import SimSpec

    with pytest.raises(ValueError) as refused:
        SimSpec(n_components=8, n_orderings=40321)
    assert str(refused.value) == ("n_orderings=40,321: 8 components have 40,320 distinct orderings (n!); give "
                                  "n_orderings <= 40,320 (up to 7 components the orderings repeat, as the audit's)")
    SimSpec(n_components=8, n_orderings=40320)  # every ordering there is: allowed


@pytest.mark.slow  # 1.5 s or more: left out of `make test-fast`
def test_a_paper_build_over_a_k_1_run_skips_what_needs_two_orderings(tmp_path):
    """A K=1 run (one ordering per item: no flip can be seen) raised IndexError in the policies (`a[:, 1]`) and
    KeyError in the K ablation; the targets that need K >= 2 or 3 say so and the others are written."""
    run = tmp_path / "run"
    code, out = app_says(AUDIT, f"hydra.run.dir={run}", "progress=false", "model=oracle", "facet=option_order",
                         "dataset=synthetic_mcq", "limit=3", "k=1", "bootstrap=10")
    assert code == 0, out
    code, out = app_says(PAPER, f"input={run}", "bootstrap=10", "mechanism.judges=[]", f"out={tmp_path / 'all'}")
    assert code == 0, out
    assert "table4-mitigation: skipped (P1-P6 need K >= 3 orderings per cell" in out, out
    assert "table-k-ablation: skipped (the K ablation needs K >= 2 orderings per cell" in out, out
    assert not [line for line in out.splitlines() if line.startswith("error: ")] and (
        tmp_path / "all" / "table1.csv").is_file()


# ---------------------------------------------------------------- issue 61 (6, 7, 9): one line, exit 2, nothing lost

def only_error(err: str) -> str:
    """The one `error:` line of an app's output (and the test fails if there are more or none)."""
    errors = [line for line in err.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, err
    return errors[0]


@pytest.mark.parametrize(("app", "value"), [(REPORT, "nan"), (PAPER, "0"), (REPORT, "2.5")])
def test_a_bootstrap_count_no_interval_can_use_is_one_line(app, value, tmp_path):
    """`report bootstrap=nan` was a TypeError in metrics/flips.py, `paper bootstrap=0` an IndexError in numpy's
    quantile: both apps refuse the value where the config is read, before any input is read or output written."""
    run = a_run(tmp_path)
    code, err = app_says(app, f"input={run}", f"bootstrap={value}", f"out={tmp_path / 'out'}")
    assert code == EXIT_USER_ERROR and only_error(err) == (
        f"error: bootstrap={value}: need a whole number bootstrap >= 1 (item-bootstrap resamples of every interval), "
        "e.g. bootstrap=1000 (the default)"), err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("value", ["0", "nan"])
def test_odis_bootstrap_count_is_refused_with_the_same_words(value, tmp_path):
    """`odi.bootstrap` (the capability-vs-flip interval's resamples) was read unchecked: 0 or nan reached numpy after
    the fits. ODI refuses it as the report and the paper refuse theirs, before any input is read (a dry run too)."""
    run = a_run(tmp_path)
    code, err = app_says(ODI, f"input={run}", f"odi.bootstrap={value}", "dry_run=true", f"out={tmp_path / 'out'}")
    assert code == EXIT_USER_ERROR and only_error(err) == (
        f"error: odi.bootstrap={value}: need a whole number odi.bootstrap >= 1 (resamples of the models for the "
        "capability-vs-flip Spearman interval), e.g. odi.bootstrap=2000 (the default)"), err
    assert not (tmp_path / "out").exists()


def not_a_runner(tmp: Path) -> list[str]:
    """`model._target_` naming a class that takes the model's settings but is no runner (it has no `preflight`)."""
    return synthetic(tmp, "model._target_=collections.OrderedDict")


CASES_61 = [
    Case("jsonl_30_options", AUDIT, lambda t: jsonl(t, item(1), item(2, choices=[f"o{i}" for i in range(30)])),
         ("mine::q2", "30 options", "at most 26", "lettered a-z")),
    Case("model_target_not_a_runner", AUDIT, not_a_runner,
         ("model oracle", "_target_ 'collections.OrderedDict' is not a runner", "preflight", "docs/plugins.md")),
    Case("jsonl_choices_differ_by_nfc", AUDIT,
         lambda t: jsonl(t, item(1), item(2, choices=["caf\u00e9", "cafe\u0301", "tea"])),
         ("items.jsonl:2", "mine::q2", "2 times", "'caf\\xe9', 'cafe\\u0301'", "unicode")),
    Case("jsonl_choices_differ_by_nfkc", AUDIT,
         lambda t: jsonl(t, item(1), item(2, choices=["\uff21\uff11", "A1", "B2"])),
         ("items.jsonl:2", "2 times", "'\\uff21\\uff11', 'a1'")),
    Case("jsonl_choices_differ_by_a_zero_width_space", AUDIT,
         lambda t: jsonl(t, item(1), item(2, choices=["Paris", "Par\u200bis", "Rome"])),
         ("items.jsonl:2", "'paris' 2 times", "'par\\u200bis'", "dataset.duplicate_choices=keep")),
    Case("jsonl_item_id_with_a_newline", AUDIT, lambda t: jsonl(t, item(1, item_id="mine::q\n1")),
         ("items.jsonl:1", "'mine::q\\n1'", "u+000a", "control character")),
    Case("jsonl_item_id_with_a_tab", AUDIT, lambda t: jsonl(t, item(1), item(2, item_id="mine::q\t2")),
         ("items.jsonl:2", "u+0009")),
]


@pytest.mark.parametrize("case", CASES_61, ids=lambda c: c.name)
def test_bad_input_61_is_one_line_exit_2_before_any_trial(case, tmp_path):
    """An item of 30 options (a ValueError at render time), a model `_target_` that is no runner (AttributeError
    `preflight`), options that differ only by Unicode normalisation or a zero-width space, and an item id holding a
    control character (all accepted without a word) are one line naming what and where, before any trial."""
    code, error = audit_here(*case.build(tmp_path))
    assert code == EXIT_USER_ERROR and error.count("\n") == 0, error
    missing = [w for w in case.words if w.lower() not in error.lower()]
    assert not missing, f"{missing} not in:\n{error}"
    assert not (tmp_path / "run" / "trials.jsonl").exists()


def test_options_that_read_otherwise_are_not_duplicates():
    """What the duplicate rule folds: spacing, canonical forms, full-width letters, invisible characters; what reads
    otherwise stays apart (a superscript is not a digit: 'x²' and 'x2' are two answers)."""
    from facet_probe.core.items import make_item, repeated_choices

    def repeated(*choices: str) -> dict:
        return repeated_choices(make_item(item_id="d::1", dataset="d", question="q", choices=choices, gold_index=0))

    assert repeated("x\u00b2", "x2", "x3") == {}
    assert repeated("\ufb01ve", "five", "six") == {"five": [0, 1]}
    assert repeated("a\u00a0b", "a b ", "c") == {"a b": [0, 1]}


def test_the_judge_on_a_read_only_run_folder_is_one_line(tmp_path):
    """Hydra opens the judge's log (`<run folder>/judge.log`) before the app runs: a read-only folder was
    'ValueError: Unable to configure handler' with its traceback; now one line, the folder untouched."""
    run = a_run(tmp_path)
    before = sorted(p.name for p in run.iterdir())
    make_read_only(run)
    proc = run_module(JUDGE, f"input={run}", "judge=gemini_pro")
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.returncode == EXIT_USER_ERROR and only_error(proc.stderr) == (
        f"error: cannot write {run / 'judge.log'}: permission denied; make that folder writable or write elsewhere "
        "(hydra.run.dir=<folder> for an audit, out=<folder> for report and ODI; the judge writes into its input run "
        "folders: judge a writable copy)")
    assert sorted(p.name for p in run.iterdir()) == before


def trials_line_with(run: Path, at: int, **fields) -> None:
    """Line `at` (1-based) of the run's trials.jsonl with `fields` set, as a newer facet_probe would write it."""
    path = run / "trials.jsonl"
    lines = path.read_text().splitlines(keepends=True)
    lines[at - 1] = json.dumps({**json.loads(lines[at - 1]), **fields}) + "\n"
    path.write_text("".join(lines))


@pytest.mark.parametrize(("field", "app"), [("key_version", AUDIT), ("scorer_version", REPORT),
                                            ("key_version", REPORT)])
def test_trials_a_newer_facet_probe_wrote_are_refused_naming_the_line(field, app, tmp_path):
    """A trial of key scheme or scorer version 99 was re-keyed (paid again) or re-scored down without a word: the
    audit resuming into the folder and the report reading it say which line a newer facet_probe wrote."""
    run = a_run(tmp_path)
    trials_line_with(run, 3, **{field: 99})
    stored = (run / "trials.jsonl").read_bytes()
    args = [f"hydra.run.dir={run}", *RESUME] if app == AUDIT else [f"input={run}", f"out={tmp_path / 'rep'}"]
    code, err = app_says(app, *args)
    newest = {"key_version": 2, "scorer_version": 3}[field]
    assert code == EXIT_USER_ERROR and only_error(err) == (
        f"error: {run / 'trials.jsonl'}:3: written by a newer facet_probe ({field} 99; this facet_probe "
        f"writes {field} {newest} and reads no later one): upgrade facet_probe (pip install -U facet_probe) to "
        "read this run folder, or run into a fresh folder; the file is left as it is"), err
    assert (run / "trials.jsonl").read_bytes() == stored


@pytest.mark.parametrize("dry_run", ["true", "false"])
def test_odi_over_a_k_1_run_is_one_line(dry_run, tmp_path):
    """A K=1 run has no order variation: ODI's dry run and its full fit ran on, with only numpy's and ArviZ's
    warnings; both refuse it before any fit, nothing written."""
    run = a_run(tmp_path, k=1)
    code, err = app_says(ODI, f"input={run}", f"dry_run={dry_run}", f"out={tmp_path / 'odi'}", "odi=smoke")
    assert code == EXIT_USER_ERROR and only_error(err) == (
        "error: odi: the trials hold one ordering per item (K=1): ODI models how answers vary across orderings "
        "and K=1 has none; audit with k >= 2 (the paper's k=6) and fit that run"), err
    assert not (tmp_path / "odi").exists()


@pytest.mark.parametrize(("model_id", "words"), [
    ("google/medgemma-4b-it", ("medgemma_4b: google/medgemma-4b-it is gated on the Hugging Face hub",
                               "Access to model google/medgemma-4b-it is restricted",
                               "Accept its licence at {hub}/google/medgemma-4b-it",
                               "hf auth login", "HF_TOKEN")),
    ("google/medgemma-4b-itt", ("medgemma_4b: the Hugging Face hub has no model google/medgemma-4b-itt",
                                "Repository not found", "check model.model_id", "hf auth login")),
], ids=["gated", "misspelt"])
def test_a_gated_or_misspelt_hub_model_is_one_line(model_id, words, tmp_path, monkeypatch):
    """MedGemma is gated; a wrong repo id does not exist: each was huggingface_hub's traceback, exit 1. A loopback
    hub answers as the hub does (401 with GatedRepo / RepoNotFound); the audit names the model, the hub's reason
    and what to do (the licence page on the hub's endpoint), exit 2, before any trial."""
    from facet_probe_dev.testing.fake_hub import FakeHub

    with FakeHub(gated=("google/medgemma-4b-it",)) as hub:
        hub.serve(monkeypatch, tmp_path / "hf")
        code, error = audit_here(*synthetic(tmp_path, "model=medgemma_4b", f"model.model_id={model_id}",
                                            "model.device=cpu", "model.quantization=off"))
        assert any(f"/api/models/{model_id}/" in p for p in hub.paths), hub.paths
    assert code == EXIT_USER_ERROR and error.count("\n") == 0, error
    missing = [w for w in words if w.format(hub=hub.url) not in error]
    assert not missing, f"{missing} not in:\n{error}"
    assert not (tmp_path / "run" / "trials.jsonl").exists()
