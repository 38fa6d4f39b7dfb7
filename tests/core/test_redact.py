"""No credential in a URL (or an API key) reaches a file or a log: the pure redactors, then real runs of
`python -m facet_probe` (in this process, the shared `run_module`) against the loopback fake provider, every file of
the run folder read back."""

from __future__ import annotations

import base64
import json
import logging
import re
import sys
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from facet_probe.core.redact import install_log_redaction, redact_config, redact_text, redact_url
from facet_probe_dev.testing.fake_providers import FakeProviderServer
from facet_probe_dev.testing.in_process import Ran, run_module

ROOT = Path(__file__).resolve().parents[2]
SECRET = "s3cretPW42"
KEY = "sk-never-written-0123456789"


@pytest.mark.parametrize(("url", "expected"), [
    ("http://user:s3cret@127.0.0.1:8000/v1", "http://user:***@127.0.0.1:8000/v1"),
    ("https://ghp_token123@host/v1", "https://***@host/v1"),
    ("http://h/v1?api_key=abc&model=m&token=t", "http://h/v1?api_key=***&model=m&token=***"),
    ("http://h/v1?key=abc;Signature=x", "http://h/v1?key=***;Signature=***"),
    ("http://127.0.0.1:8000/v1?model=m", "http://127.0.0.1:8000/v1?model=m"),
    ("http://[::1]:8000/v1", "http://[::1]:8000/v1"),
    ("http://a:b@c:99999/", "http://***@c:99999/"),  # a malformed port: mask the userinfo all the same
])
def test_redact_url_masks_password_token_user_and_secret_params(url, expected):
    assert redact_url(url) == expected


def test_redact_text_masks_every_url_in_a_text_and_secret_environment_values(monkeypatch):
    monkeypatch.setenv("MY_SERVICE_API_KEY", "abcdefgh12345")
    text = ("['model.base_url=http://u:pw1@127.0.0.1:4/v1', 'x'] and GET https://h/v1/m?key=k2 failed; "
            "header Bearer abcdefgh12345; see https://docs.example/page")
    clean = redact_text(text)
    assert "pw1" not in clean and "k2" not in clean and "abcdefgh12345" not in clean
    assert "http://u:***@127.0.0.1:4/v1'" in clean and "https://docs.example/page" in clean


#: (text an error or a log might hold, the secret in it): HTTP Basic (base64 of user:password, as a 401 echoed it),
#: Bearer tokens, the providers' key headers (as a header line, a dict's repr or JSON) and a key in a query string.
CREDENTIAL_FORMS = [
    ("Error code: 401 - Incorrect API key provided: Basic dTpSRUwzUFc0MDE=", "dTpSRUwzUFc0MDE="),
    ("headers: {'Authorization': 'Basic dXNlcjpwQHNz'}", "dXNlcjpwQHNz"),
    ("authorization: Bearer sk-proj-abc123XYZ", "sk-proj-abc123XYZ"),
    ("invalid token Bearer ya29.a0AfH6SMBxQ (expired)", "ya29.a0AfH6SMBxQ"),
    ("request headers x-api-key: sk-ant-api03-zz99", "sk-ant-api03-zz99"),
    ('{"x-goog-api-key": "AIzaSyD-abc123"}', "AIzaSyD-abc123"),
    ("X-Goog-Api-Key=AIzaSyD-abc123 rejected", "AIzaSyD-abc123"),
    ("POST /v1beta/models/m:generateContent?alt=sse&key=AIzaSyD-abc123 failed", "AIzaSyD-abc123"),
    ("GET models?key=AIzaSyD-abc123", "AIzaSyD-abc123"),
]


@pytest.mark.parametrize(("text", "secret"), CREDENTIAL_FORMS)
def test_every_form_of_a_credential_in_a_text_is_masked(text, secret):
    clean = redact_text(text, secrets=[])  # by its form alone, not because the environment holds it
    assert secret not in clean and "***" in clean, clean


def test_words_that_only_look_like_credentials_are_kept():
    for text in ("Basic information about the item", "missing Bearer token", "the answer key=B is wrong",
                 "Authorization failed", "x-api-key header is missing"):
        assert redact_text(text) == text


def test_redact_config_returns_a_redacted_copy_and_leaves_the_original():
    cfg = OmegaConf.create({"model": {"base_url": "http://u:pw@h/v1", "name": "m"}, "urls": ["http://t@h"],
                            "root": "/data", "u": "${model.base_url}"})
    clean = redact_config(cfg)
    assert clean.model.base_url == "http://u:***@h/v1" and clean.u == "http://u:***@h/v1"
    assert clean.urls == ["http://***@h"] and clean.model.name == "m" and clean.root == "/data"
    assert cfg.model.base_url == "http://u:pw@h/v1"


def test_log_records_are_redacted_whatever_handler_formats_them(caplog):
    install_log_redaction()
    logger = logging.getLogger("httpx_like")
    with caplog.at_level(logging.INFO):
        logger.info('HTTP Request: POST %s "200 OK"', "http://u:pw9@h/v1/chat")
        try:
            raise ValueError("cannot reach http://u:pw9@h/v1")
        except ValueError:
            logger.exception("failed")
    assert "pw9" not in caplog.text and "http://u:***@h/v1/chat" in caplog.text


def files_holding(root: Path, needle: str) -> list[str]:
    """Every path under root that names needle, or a file (binary ones too) whose bytes contain it."""
    return [str(p.relative_to(root)) for p in root.rglob("*")
            if needle in str(p.relative_to(root)) or (p.is_file() and needle.encode() in p.read_bytes())]


def audit(*overrides: str, multirun: bool = False) -> Ran:
    """An audit of the served model with the key `KEY` in its environment, in this process."""
    return run_module("facet_probe", *(["-m"] if multirun else []), "model=openai_compat", "model.model_id=served-model",
                   "facet=option_order", "dataset=synthetic_mcq", "limit=2", "progress=false", *overrides,
                   env={"OPENAI_API_KEY": KEY}, cwd=ROOT)


@pytest.fixture(scope="module")
def server():
    with FakeProviderServer(served_models=("served-model",)) as srv:
        yield srv


def assert_no_secret(out: Path, proc: Ran, *secrets: str) -> None:
    for secret in secrets:
        assert files_holding(out, secret) == [], f"{secret!r} written to files"
        assert secret not in proc.stdout and secret not in proc.stderr, f"{secret!r} in the output"


@pytest.mark.slow  # over 2 s (measured in make test-fast, 2026-12-05)
def test_a_password_in_base_url_reaches_no_file_and_no_log(tmp_path, server):
    out = tmp_path / "out"
    proc = audit(f"model.base_url=http://user:{SECRET}@127.0.0.1:{server.port}/v1", f"out_root={out}")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    run_dir = next(out.rglob("run_status.json")).parent
    assert {".hydra/config.yaml", ".hydra/overrides.yaml", ".hydra/hydra.yaml", "audit.log", "config.yaml",
            "trials.jsonl"} <= {str(p.relative_to(run_dir)) for p in run_dir.rglob("*")}
    assert_no_secret(out, proc, SECRET, KEY)
    assert "user:***@127.0.0.1" in (run_dir / "config.yaml").read_text()  # redacted, not dropped
    assert len(server.ok_calls()) >= 12  # the calls were made (2 items x 6 orderings)


def test_a_401_echoing_the_basic_auth_of_a_base_url_leaves_it_in_no_trial_no_file_and_no_output(tmp_path):
    """The real case: a server answering 401 with the Authorization header it got (`Basic <base64 of u:pw>`, httpx's
    form of a base_url's user:password) left the base64 in each trial's `error`. The real SDK, a loopback server."""
    out, password = tmp_path / "out", "REL3PW401"
    basic = base64.b64encode(f"u:{password}".encode()).decode()
    with FakeProviderServer(served_models=("served-model",), faults={"unauthorized": 1.0}) as srv:
        proc = audit(f"model.base_url=http://u:{password}@127.0.0.1:{srv.port}/v1", f"out_root={out}")
        assert {call.api_key for call in srv.calls} == {f"Basic {basic}"}  # the URL's credentials, not KEY
    assert proc.returncode == 2, proc.stdout + proc.stderr  # no call succeeded
    (trials,) = out.rglob("trials.jsonl")
    errors = [json.loads(line)["error"] for line in trials.read_text().splitlines()]
    assert len(errors) == 12 and all("401" in e and "Basic ***" in e for e in errors)
    assert_no_secret(out, proc, password, basic, KEY)
    assert proc.stderr.count("sent as HTTP Basic auth, in place of the API key (OPENAI_API_KEY is not sent") == 1


def test_a_sweep_and_a_failing_run_with_a_key_in_the_query_leak_nothing(tmp_path, server):
    # The OpenAI SDK cannot call a base URL with a query (404), so this run fails; it must still not leak.
    sweep = tmp_path / "sweep"
    proc = audit(f"model.base_url='http://user:{SECRET}@127.0.0.1:{server.port}/v1?api_key={SECRET}Q'",
                 f"hydra.sweep.dir={sweep}", multirun=True)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert (sweep / "multirun.yaml").exists() and list(sweep.rglob(".hydra/hydra.yaml"))
    assert_no_secret(sweep, proc, SECRET, KEY)


def test_each_of_several_urls_hydra_joins_is_masked_and_its_escaped_form_too():
    """Hydra joins overrides with commas (`hydra.job.override_dirname`) and writes a sweep's with `:` and `=`
    escaped (`http\\://u\\:pw@h`); one greedy URL pattern once masked only the first password."""
    joined = ("judge.runner.base_url=http://judge:pwA@127.0.0.1:9/v1,judge=gpt_54_mini,limit=2,"
              "model.base_url=http://user:pwB@127.0.0.1:9/v1,x.url=http://u:pwC@h:1,y.url=http://tok_pwD@h2")
    assert redact_text(joined) == ("judge.runner.base_url=http://judge:***@127.0.0.1:9/v1,judge=gpt_54_mini,"
                                   "limit=2,model.base_url=http://user:***@127.0.0.1:9/v1,x.url=http://u:***@h:1,"
                                   "y.url=http://***@h2")
    escaped = r"- model.base_url=http\://user\:pwB@127.0.0.1\:9/v1?api_key\=pwE&model\=m"
    assert redact_text(escaped) == r"- model.base_url=http\://user\:***@127.0.0.1\:9/v1?api_key\=***&model\=m"
    query = "a.url=http://h/v1?api_key=pwF,b.url=https://u:pwG@h/v1?token=pwH&x=1"
    assert redact_text(query) == "a.url=http://h/v1?api_key=***,b.url=https://u:***@h/v1?token=***&x=1"


def judge_or_answer(call) -> str:
    """The fake provider's reply: a judge's verdict for a judge prompt, an answer for the model's."""
    return "Verdict: C\nReason: differ" if "ANSWER 1:" in call.texts()[-1] else "The answer is (A)."


@pytest.mark.slow  # 1.5 s or more: left out of `make test-fast`
@pytest.mark.parametrize("multirun", [False, True], ids=["run", "sweep"])
def test_two_credentialed_urls_in_one_command_reach_no_file_and_no_output(multirun, tmp_path, monkeypatch, capsys):
    """`model.base_url` and `judge.runner.base_url` each with a password, through the console script in this
    process: no file of the run folder (or the sweep's folder), no folder name and no output holds either."""
    from facet_probe.__main__ import cli

    out, judge_secret = tmp_path / "out", "j8dgePW77"
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.delenv("HYDRA_FULL_ERROR", raising=False)
    with FakeProviderServer(served_models=("served-model",), reply=judge_or_answer) as srv:
        monkeypatch.setattr(sys, "argv", [
            "facet-probe", *(["-m"] if multirun else []), "model=openai_compat", "model.model_id=served-model",
            f"model.base_url=http://user:{SECRET}@127.0.0.1:{srv.port}/v1", "judge=gpt_54_mini",
            f"judge.runner.base_url=http://judge:{judge_secret}@127.0.0.1:{srv.port}/v1",
            "facet=mixed_modality_order", "dataset=synthetic_mixed", "limit=2", "k=2", "bootstrap=10", "progress=false",
            f"out_root={out}", f"hydra.sweep.dir={out / 'sweep'}"])
        cli()
        providers = {call.provider for call in srv.ok_calls()}
    assert providers == {"openai_chat", "openai_responses"}  # the model (Chat Completions) and the judge both called
    shown = capsys.readouterr()
    run_dir = next(out.rglob("run_status.json")).parent
    written = {p.name for p in run_dir.rglob("*")}
    assert {"hydra.yaml", "overrides.yaml", "audit.log", "judgments.jsonl", "report.md", "explorer.html",
            "cost.json", "run_identity.json"} <= written
    if multirun:
        assert {"multirun.yaml", "sweep_status.json", "sweep_status.md"} <= {p.name for p in (out / "sweep").iterdir()}
    for secret in (SECRET, judge_secret, KEY):
        assert files_holding(out, secret) == [], f"{secret!r} written"
        assert secret not in shown.out + shown.err, f"{secret!r} shown"
    hydra_yaml = (run_dir / ".hydra" / "hydra.yaml").read_text()  # masked, not dropped (a sweep escapes ':')
    assert re.search(r"judge\\?:\*\*\*@127\.0\.0\.1", hydra_yaml) and re.search(r"user\\?:\*\*\*@127", hydra_yaml)


def test_a_run_folder_named_by_a_base_url_never_spells_or_hashes_its_password():
    """The folder name spells out a short override and hashes a long one: from the masked value, in a plain run
    and in a sweep (whose overrides Hydra escapes: `http\\://u\\:pw@h`)."""
    from facet_probe.config.schema import settings_suffix

    for override in ("model.base_url=http://u:pw55@h/v1", r"model.base_url=http\://u\:pw55@h/v1"):
        assert "pw55" not in settings_suffix([override]) and "model.base_url=http" in settings_suffix([override])
    long = r"model.base_url=http\://user\:{}@inference.example.org\:8000/v1"
    assert settings_suffix([long.format("pwA")]) == settings_suffix([long.format("pwB")])  # no hash of a secret
