"""Only the project's own INFO lines reach the terminal and the app's log: a library's (httpx2's `HTTP Request: POST
...` once per call, the SDKs', ...) show from WARNING up, unless asked for with `hydra.verbose`. One place owns it
(`facet_probe.core.console.quiet_libraries`, called by `run_app`, which every app runs through)."""

from __future__ import annotations

import logging
from importlib.metadata import entry_points
from pathlib import Path

import pytest

from facet_probe.core.console import quiet_libraries
from facet_probe_dev.testing.fake_providers import FakeProviderServer
from facet_probe_dev.testing.in_process import run_module

ROOT = Path(__file__).resolve().parents[2]
KEY = {"OPENAI_API_KEY": "sk-openai-test-key-0123456789"}
LIBRARIES = ("httpx2", "httpx", "httpcore2", "openai", "anthropic", "google_genai._api_client", "urllib3", "pymc")


@pytest.fixture
def hydra_like_logging():
    """The root logger at INFO, as Hydra's job logging sets it; every level put back afterwards."""
    loggers = [logging.getLogger(), *(logging.getLogger(n) for n in (*LIBRARIES, "facet_probe", "hydra"))]
    saved = [lg.level for lg in loggers]
    logging.getLogger().setLevel(logging.INFO)
    yield
    for lg, level in zip(loggers, saved, strict=True):
        lg.setLevel(level)


def shown_at_info(name: str) -> bool:
    return logging.getLogger(name).isEnabledFor(logging.INFO)


def test_a_library_logs_from_warning_up_and_the_project_and_hydra_at_info(hydra_like_logging):
    quiet_libraries()
    assert not any(shown_at_info(name) for name in LIBRARIES)
    assert all(logging.getLogger(name).isEnabledFor(logging.WARNING) for name in LIBRARIES)
    assert shown_at_info("facet_probe.judge") and shown_at_info("hydra._internal.core_plugins.basic_launcher")


def test_hydra_verbose_brings_a_library_back(hydra_like_logging):
    logging.getLogger("httpx2").setLevel(logging.DEBUG)  # what `hydra.verbose=httpx2` does before the app starts
    quiet_libraries()
    assert shown_at_info("httpx2") and not shown_at_info("openai")
    logging.getLogger("httpx2").setLevel(logging.NOTSET)
    logging.getLogger().setLevel(logging.DEBUG)  # `hydra.verbose=true`: every logger
    quiet_libraries()
    assert all(shown_at_info(name) for name in LIBRARIES)


def test_every_app_runs_through_run_app_the_one_place_that_sets_the_levels():
    apps = [ep for ep in entry_points(group="console_scripts") if ep.value.startswith("facet_probe.")]
    assert {"facet-probe", "facet-probe-judge", "facet-probe-odi", "facet-probe-paper", "facet-probe-attack"} <= {
        ep.name for ep in apps}
    for app in apps:  # read, not imported (an app's imports take seconds)
        assert "run_app(" in (ROOT / f"{app.module.replace('.', '/')}.py").read_text(), app.name


def judge_or_answer(call) -> str:
    """The fake provider's reply: a judge's verdict for a judge prompt, an answer for the model's."""
    return "Verdict: C\nReason: differ" if "ANSWER 1:" in call.texts()[-1] else "The answer is (A)."


@pytest.mark.slow  # an audit and a judge app over the loopback server: about 2 s
def test_the_audit_and_the_judge_app_print_no_request_line_per_call_unless_asked(tmp_path):
    run = tmp_path / "run"
    with FakeProviderServer(served_models=("served-model",), reply=judge_or_answer) as server:
        url = f"{server.url}/v1"
        audit = run_module("facet_probe", "model=openai_compat", "model.model_id=served-model", f"model.base_url={url}",
                           "facet=mixed_modality_order", "dataset=synthetic_mixed", "limit=2", "k=2", "progress=false",
                           f"hydra.run.dir={run}", env=KEY, cwd=ROOT)
        calls = len(server.ok_calls())
        judge = run_module("facet_probe.judge", f"input={run}", "judge=gpt_54_mini", f"judge.runner.base_url={url}",
                           env=KEY, cwd=ROOT)
        judged = len(server.ok_calls()) - calls
        logs = {"audit": (run / "audit.log").read_text(), "judge": (run / "judge.log").read_text()}
        asked = run_module("facet_probe.judge", f"input={run}", "judge=gpt_54_mini", f"judge.runner.base_url={url}",
                           "judge.protocol=per_answer", "hydra.verbose=httpx2", env=KEY, cwd=ROOT)
    assert audit.returncode == judge.returncode == asked.returncode == 0, judge.stderr + audit.stderr + asked.stderr
    assert calls > 0 and judged > 0 and f"judge calls this run: {judged}" in judge.stdout
    for app, ran in (("audit", audit), ("judge", judge)):
        assert "HTTP Request" not in ran.stdout + ran.stderr + logs[app], app
        assert "[facet_probe" in ran.stdout, app  # the project's own INFO lines still show
    assert "HTTP Request: POST" in asked.stdout  # asked for by name (a second protocol: new calls)
