"""No credential in a URL (or an API key) reaches a file or a log: the pure redactors, then real runs of
`python -m facet_probe` against the loopback fake provider, every file of the run folder read back."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from facet_probe.redact import install_log_redaction, redact_config, redact_text, redact_url
from facet_probe_dev.testing.fake_providers import FakeProviderServer

ROOT = Path(__file__).resolve().parents[1]
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


def audit(*overrides: str, multirun: bool = False) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "HYDRA_FULL_ERROR"}
    env.update(OPENAI_API_KEY=KEY, OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    cmd = [sys.executable, "-m", "facet_probe", *(["-m"] if multirun else []), "model=openai_compat", "model.model_id=served-model",
           "facet=option_order", "dataset=synthetic_mcq", "limit=2", "progress=false", *overrides]
    return subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def server():
    with FakeProviderServer(served_models=("served-model",)) as srv:
        yield srv


def assert_no_secret(out: Path, proc: subprocess.CompletedProcess, *secrets: str) -> None:
    for secret in secrets:
        assert files_holding(out, secret) == [], f"{secret!r} written to files"
        assert secret not in proc.stdout and secret not in proc.stderr, f"{secret!r} in the output"


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


def test_a_sweep_and_a_failing_run_with_a_key_in_the_query_leak_nothing(tmp_path, server):
    # The OpenAI SDK cannot call a base URL with a query (404), so this run fails; it must still not leak.
    sweep = tmp_path / "sweep"
    proc = audit(f"model.base_url='http://user:{SECRET}@127.0.0.1:{server.port}/v1?api_key={SECRET}Q'",
                 f"hydra.sweep.dir={sweep}", multirun=True)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert (sweep / "multirun.yaml").exists() and list(sweep.rglob(".hydra/hydra.yaml"))
    assert_no_secret(sweep, proc, SECRET, KEY)
