"""API keys come from the environment only, are checked before any call, and never reach records or logs."""

from __future__ import annotations

import base64
import json
import logging

import pytest
from api_test_helpers import KEYS, fast, interleaved_prompt, make_runner, text_prompt, url_for

from facet_probe.runners.base import Request, RunnerError, generate_all
from facet_probe_dev.testing.fake_providers import FakeProviderServer

CONFIGS = {
    "gemini_31_pro": "GOOGLE_API_KEY",
    "claude_opus_47": "ANTHROPIC_API_KEY",
    "gpt_55": "OPENAI_API_KEY",
}


@pytest.mark.parametrize("config,env", CONFIGS.items())
def test_a_missing_key_fails_check_ready_naming_the_variable(config, env, monkeypatch):
    for var in (*KEYS, "GEMINI_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    with FakeProviderServer() as server:
        runner = make_runner(config, url_for(config, server.url))
        with pytest.raises(RunnerError, match=env):
            runner.check_ready()
        assert server.calls == []


def test_gemini_also_takes_gemini_api_key(monkeypatch):
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    monkeypatch.setenv("GEMINI_API_KEY", "gemini-alt-key-0123456789")
    with FakeProviderServer() as server:
        runner = make_runner("gemini_3_flash", server.url)
        runner.check_ready()
        generate_all(runner, [Request(key="k", prompt=text_prompt("k"))])
        assert server.calls[-1].api_key == "gemini-alt-key-0123456789"


@pytest.mark.parametrize("config", [*CONFIGS, "openai_compat"])
def test_no_key_in_responses_fingerprints_or_debug_logs(config, api_keys, images, caplog):
    caplog.set_level(logging.DEBUG)  # every logger, SDKs and httpx2 included
    with FakeProviderServer() as server:
        runner = make_runner(config, url_for(config, server.url), **fast(config))
        runner.check_ready()
        out = generate_all(runner, [Request(key="k", prompt=interleaved_prompt(images), seed=1)])
        assert server.calls[-1].api_key in api_keys.values()  # the key was used on the wire
    resp = out["k"]
    written = json.dumps(
        [
            resp.text,
            resp.thinking,
            resp.error,
            resp.usage,
            resp.provenance,
            runner.fingerprint(),
            runner.cost_summary(),
        ],
        default=str,
    )
    logs = "\n".join(r.getMessage() for r in caplog.records) + caplog.text
    assert caplog.records  # the SDKs did log the calls at DEBUG level
    for key in api_keys.values():
        assert key not in written
        assert key not in logs


@pytest.mark.parametrize("config", ["claude_sonnet_46", "gpt_55", "gemini_31_pro"])
def test_an_error_echoing_the_key_is_scrubbed_and_not_retried(config, api_keys, caplog):
    caplog.set_level(logging.DEBUG)
    with FakeProviderServer(script=["unauthorized"]) as server:
        runner = make_runner(config, url_for(config, server.url), **fast(config))
        resp = generate_all(runner, [Request(key="k", prompt=text_prompt("k"))])["k"]
        assert len(server.calls) == 1  # a 401 is final
    assert "401" in resp.error and "***" in resp.error
    for key in api_keys.values():
        assert key not in resp.error and key not in caplog.text


@pytest.mark.parametrize("config", ["claude_sonnet_46", "gpt_55", "gemini_31_pro", "openai_compat"])
def test_a_base_url_password_goes_as_basic_auth_is_said_once_and_never_reaches_an_error(config, api_keys, capsys):
    """The real SDK against the loopback server, whose 401 echoes the credential it got: httpx sends the URL's
    user:password as HTTP Basic auth, which takes the Authorization header (the key's, for OpenAI and Anthropic;
    Gemini's key has a header of its own). The runner says which in one line; no error holds the password or
    its base64."""
    password = "REL3PW401"
    basic = base64.b64encode(f"u:{password}".encode()).decode()
    with FakeProviderServer(script=["unauthorized"]) as server:
        runner = make_runner(config, url_for(config, server.url).replace("http://", f"http://u:{password}@"),
                             **fast(config))
        said = capsys.readouterr().err
        resp = generate_all(runner, [Request(key="k", prompt=text_prompt("k"))])["k"]
        sent = server.calls[-1].api_key
    assert said.count("\n") == 1 and "sent as HTTP Basic auth" in said
    if runner.key_header == "Authorization":
        assert sent == f"Basic {basic}" and "in place of the API key" in said
    else:
        assert sent in api_keys.values() and "beside the API key" in said
    assert "401" in resp.error
    for secret in (password, basic):
        assert secret not in said and secret not in resp.error
    assert runner.scrub(f"echo: {basic} / {password}") == "echo: *** / ***"  # bare, without its header name
