"""What the command lines say, in-process (each app's console-script function with `sys.argv` set): an error
prints once, a misspelt group option or key gets a "did you mean", every app takes `progress=false`, and the
`--help` of each app lists what it should and cites only docs that exist."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from facet_probe.paper.targets import TARGETS
from facet_probe_dev.testing.in_process import run_argv

ROOT = Path(__file__).resolve().parents[2]
#: Every console script's module and function (pyproject.toml [project.scripts]).
SCRIPTS = {"facet-probe": "facet_probe.__main__:cli", "facet-probe-attack": "facet_probe.attack.__main__:cli",
           "facet-probe-report": "facet_probe.report.__main__:cli", "facet-probe-odi": "facet_probe.odi.__main__:cli",
           "facet-probe-paper": "facet_probe.paper.__main__:cli", "facet-probe-explore": "facet_probe.explore.__main__:cli",
           "facet-probe-judge": "facet_probe.judge.__main__:main", "facet-probe-decoder": "facet_probe.decoder.__main__:cli"}


def run(script: str, *args: str, monkeypatch, capsys) -> tuple[int, str, str]:
    """The console script in this process, through the one harness (`run_argv`: Hydra's global state, the
    environment and `sys.argv` restored after it): (exit code, stdout, stderr)."""
    ran = run_argv([script, *args], env={"HF_HUB_OFFLINE": "1"})
    return ran.returncode, ran.stdout, ran.stderr


def test_the_console_scripts_here_are_the_packaged_ones():
    import tomllib

    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts == SCRIPTS


# ---------------------------------------------------------------- an error prints once

def test_an_audit_error_prints_once_and_is_kept_in_the_run_log(tmp_path, monkeypatch, capsys):
    items = tmp_path / "items.jsonl"
    items.write_text('{"item_id": "mine::q1", "dataset": "mine", "question": "a?", "choices": ["1", "2"], '
                     '"gold_index": 0}\n'
                     '{"item_id": \n')
    code, out, err = run("facet-probe", f"hydra.run.dir={tmp_path / 'run'}", "progress=false", "model=oracle",
                         "facet=option_order", "dataset=items_jsonl", f"dataset.path={items}",
                         monkeypatch=monkeypatch, capsys=capsys)
    assert code == 2
    message = "items.jsonl:2: not valid JSON"
    assert (out + err).count(message) == 1 and f"error: {items}:2" in err
    assert message in (tmp_path / "run" / "audit.log").read_text()  # the run's log keeps it


def test_a_report_error_prints_once(tmp_path, monkeypatch, capsys):
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "trials.jsonl").write_text('{"trial_key": "a"}\nnot json\n{"trial_key": "b"}\n')
    code, out, err = run("facet-probe-report", f"input={tmp_path / 'run'}", monkeypatch=monkeypatch, capsys=capsys)
    assert code == 2 and "malformed" in err
    assert (out + err).count("trials.jsonl:2") == 1


def test_a_judge_error_prints_once(tmp_path, monkeypatch, capsys):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "items.jsonl").write_text("")
    (run_dir / "trials.jsonl").write_text("")
    for key in ("GOOGLE_API_KEY", "GEMINI_API_KEY"):
        monkeypatch.delenv(key, raising=False)
    code, out, err = run("facet-probe-judge", f"input={run_dir}", "judge=gemini_pro", monkeypatch=monkeypatch,
                         capsys=capsys)
    assert code == 2 and "GOOGLE_API_KEY" in err
    assert (out + err).count("no API key") == 1


# ---------------------------------------------------------------- did you mean

@pytest.mark.parametrize(("override", "hint"), [
    ("model=qwen35-9b", "did you mean 'model=qwen35_9b'?"),
    ("facet=option_orders", "did you mean 'facet=option_order'?"),
    ("limt=3", "did you mean 'limit'?"),
    ("prompt.cott=true", "did you mean 'prompt.cot'?"),
])
def test_a_misspelt_option_or_key_says_did_you_mean(override, hint, tmp_path, monkeypatch, capsys):
    code, out, err = run("facet-probe", f"hydra.run.dir={tmp_path / 'run'}", override, monkeypatch=monkeypatch,
                         capsys=capsys)
    assert code == 2 and "Traceback" not in err
    (line,) = [line for line in err.splitlines() if line.strip()]  # one line
    assert line.startswith("error: ") and hint in line


def test_an_unknown_option_still_lists_every_option_of_its_group(tmp_path, monkeypatch, capsys):
    code, _, err = run("facet-probe", f"hydra.run.dir={tmp_path / 'run'}", "facet=option_orders",
                       monkeypatch=monkeypatch, capsys=capsys)
    options = sorted(p.stem for p in (ROOT / "facet_probe" / "conf" / "facet").glob("*.yaml"))
    assert code == 2 and f"the facet options: {', '.join(options)}" in err


def test_no_hint_where_nothing_is_close(tmp_path, monkeypatch, capsys):
    code, _, err = run("facet-probe", f"hydra.run.dir={tmp_path / 'run'}", "model=zzzzzz", monkeypatch=monkeypatch,
                       capsys=capsys)
    assert code == 2 and "did you mean" not in err and "model/zzzzzz" in err


# ---------------------------------------------------------------- progress=false everywhere

@pytest.mark.parametrize("script", sorted(SCRIPTS))
def test_every_app_takes_progress_false(script, monkeypatch, capsys):
    code, out, err = run(script, "progress=false", "--cfg", "job", monkeypatch=monkeypatch, capsys=capsys)
    assert code == 0, err
    assert re.search(r"^progress: false$", out, flags=re.M), out


# ---------------------------------------------------------------- --help

def help_text(script: str, monkeypatch, capsys) -> str:
    code, out, err = run(script, "--help", monkeypatch=monkeypatch, capsys=capsys)
    assert code == 0, err
    return out


def test_paper_help_lists_every_target(monkeypatch, capsys):
    text = help_text("facet-probe-paper", monkeypatch, capsys)
    head = text.split("== Config groups")[0]
    listed = set(re.findall(r"[\w-]+", head.split("Targets")[1]))
    assert set(TARGETS) <= listed


@pytest.mark.parametrize("script", sorted(SCRIPTS))
def test_help_cites_only_docs_that_exist(script, monkeypatch, capsys):
    text = help_text(script, monkeypatch, capsys)
    cited = set(re.findall(r"docs/[\w.-]+\.md", text))
    assert all((ROOT / doc).is_file() for doc in cited), sorted(d for d in cited if not (ROOT / d).is_file())


def test_judge_help_cites_its_doc(monkeypatch, capsys):
    assert "docs/judge.md" in help_text("facet-probe-judge", monkeypatch, capsys)
    assert "budget_usd" in (ROOT / "docs" / "judge.md").read_text()



def test_progress_false_turns_the_odi_samplers_bars_off(tmp_path):
    from hydra import compose, initialize_config_module

    from facet_probe.odi.__main__ import run_from_config
    from facet_probe.odi.simulate import SimSpec, simulate, write_run_folder

    folder = write_run_folder(simulate(SimSpec(n_models=2, facets=("option_order",), items_per_facet=3,
                                               datasets_per_facet=1, seed=1)), tmp_path / "run")
    with initialize_config_module("facet_probe.conf", version_base="1.3"):
        shown = run_from_config(compose("odi_app", overrides=[f"input={folder}"]))
        hidden = run_from_config(compose("odi_app", overrides=[f"input={folder}", "progress=false"]))
    assert shown.fit.progress and not hidden.fit.progress
