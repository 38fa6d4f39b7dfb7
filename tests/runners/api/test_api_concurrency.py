"""The call engine under faults and rate limits: every request ends once, nothing is paid for twice.

Real SDKs against the loopback fake provider, with millisecond latencies.
"""

from __future__ import annotations

import time
from collections import Counter

import pytest
from api_test_helpers import fast, make_runner, text_prompt, url_for

from facet_probe.runners.api.concurrency import ConcurrencySettings
from facet_probe.runners.base import Request, generate_all
from facet_probe_dev.testing.fake_providers import FakeProviderServer

PROVIDERS = ["gemini_3_flash", "claude_sonnet_46", "gpt_54_mini", "openai_compat"]
FAULTS_20 = {"rate_limit": 0.05, "server_error": 0.05, "timeout": 0.05, "malformed": 0.05}


def requests(n: int, prefix: str = "q") -> list[Request]:
    return [Request(key=f"{prefix}{i}", prompt=text_prompt(f"{prefix}{i}"), seed=i) for i in range(n)]


def ok_calls_by_question(server: FakeProviderServer) -> Counter:
    """How many well-formed answers the server sent per question (a paid call each)."""
    return Counter(c.texts()[-1] for c in server.ok_calls())


@pytest.mark.parametrize("config", PROVIDERS)
def test_twenty_percent_faults_still_complete_every_request_exactly_once(config, api_keys):
    reqs = requests(60)
    with FakeProviderServer(faults=FAULTS_20, seed=6, hang_s=1.0) as server:
        runner = make_runner(
            config, url_for(config, server.url), **fast(config, **{"concurrency.timeout_s": 0.3})
        )
        seen = [(req.key, resp) for req, resp in runner.generate(reqs)]
        faults = server.fault_counts()

    assert Counter(key for key, _ in seen) == Counter(r.key for r in reqs)  # each once, none twice
    assert all(resp.error is None for _, resp in seen)
    replies = {c.texts()[-1]: c.reply for c in server.ok_calls()}
    assert all(resp.text == replies[f"Question {key}?"] for key, resp in seen)  # each got its own answer
    assert set(ok_calls_by_question(server).values()) == {1}  # no question was answered (billed) twice
    assert all(faults.get(kind, 0) >= 2 for kind in FAULTS_20)  # the faults did happen
    # every call the server saw is an attempt; an attempt it never saw can only be one the client timed out
    # before its request arrived (a loaded machine), never an answer counted twice
    stats = runner.last_stats
    assert sum(faults.values()) <= stats.attempts <= sum(faults.values()) + stats.failures["timeout"]


@pytest.mark.slow
def test_rate_limits_shrink_the_limit_and_every_request_still_completes(api_keys):
    with FakeProviderServer(rps_limit=60, burst=2, latency_s=0.05) as server:
        runner = make_runner(
            "gpt_54_mini",
            server.url + "/v1",
            **fast(
                "gpt_54_mini",
                **{"concurrency.initial": 16, "concurrency.max_in_flight": 32, "concurrency.max_retries": 30},
            ),
        )
        out = generate_all(runner, requests(50))
    stats = runner.last_stats
    assert all(r.error is None for r in out.values()) and len(out) == 50
    assert stats.failures["rate_limit"] > 0
    assert stats.limit_final < stats.limit_max  # it backed off
    assert set(ok_calls_by_question(server).values()) == {1}


@pytest.mark.parametrize("config", ["gemini_3_flash", "gpt_54_mini", "claude_sonnet_46"])
def test_retry_after_is_honoured_before_the_retry(config, api_keys):
    with FakeProviderServer(script=["rate_limit"], fault_retry_after_s=0.3) as server:
        runner = make_runner(config, url_for(config, server.url), **fast(config))
        resp = generate_all(runner, requests(1))["q0"]
    first, retry = server.calls
    assert first.status == 429 and retry.ok and resp.error is None
    assert retry.arrived_at - first.arrived_at >= 0.3
    assert resp.provenance["attempts"] == 2


def test_server_errors_are_retried_without_shrinking_the_limit(api_keys):
    with FakeProviderServer(faults={"server_error": 0.5}, seed=1) as server:
        runner = make_runner(
            "claude_sonnet_46", server.url, **fast("claude_sonnet_46", **{"concurrency.max_retries": 20})
        )
        out = generate_all(runner, requests(30))
    assert all(r.error is None for r in out.values())
    assert runner.last_stats.failures["server"] > 5
    assert runner.last_stats.limit_min == 4  # never cut below the initial limit


def test_a_call_failing_for_good_ends_as_an_error_response_after_bounded_retries(api_keys):
    with FakeProviderServer(faults={"server_error": 1.0}) as server:
        runner = make_runner(
            "gpt_54_mini", server.url + "/v1", **fast("gpt_54_mini", **{"concurrency.max_retries": 2})
        )
        out = generate_all(runner, requests(3))
    assert len(server.calls) == 9  # 3 requests x (1 + 2 retries)
    for resp in out.values():
        assert resp.text == "" and "server" in resp.error and "gave up after 3 attempt(s)" in resp.error


def test_a_bad_request_is_not_retried_and_the_next_run_retries_it(api_keys):
    with FakeProviderServer(script=["bad_request"]) as server:
        runner = make_runner("gemini_3_flash", server.url, **fast("gemini_3_flash"))
        first = generate_all(runner, requests(1))["q0"]
        assert "fatal" in first.error and "400" in first.error and len(server.calls) == 1
        again = generate_all(runner, requests(1))["q0"]  # errors are not cached: asked again
    assert again.error is None and len(server.calls) == 2


def test_results_are_yielded_as_soon_as_each_completes(api_keys):
    def latency(call):
        return 1.0 if "slow" in call.texts()[-1] else 0.01

    reqs = [Request(key="slow", prompt=text_prompt("slow"))] + requests(5)
    with FakeProviderServer(latency_for=latency) as server:
        runner = make_runner("gpt_54_mini", server.url + "/v1", **fast("gpt_54_mini"))
        t0 = time.perf_counter()
        arrivals = [(req.key, time.perf_counter() - t0) for req, _ in runner.generate(reqs)]
    assert arrivals[-1][0] == "slow"
    assert arrivals[0][1] < 0.6  # the first fast answer did not wait for the slow one


def test_stopping_mid_run_then_resuming_calls_only_what_was_not_returned(api_keys):
    reqs = requests(24)
    returned = {}
    with FakeProviderServer(latency_s=0.02) as server:
        runner = make_runner("claude_sonnet_46", server.url, **fast("claude_sonnet_46"))
        for req, resp in runner.generate(reqs):  # the app stores each one at once, then is killed
            returned[req.key] = resp
            if len(returned) == 8:
                break
        calls_before = len(server.calls)
        rest = [r for r in reqs if r.key not in returned]
        fresh = make_runner("claude_sonnet_46", server.url, **fast("claude_sonnet_46"))  # a new process
        resumed = generate_all(fresh, rest)
        resumed_questions = [c.texts()[-1] for c in server.calls[calls_before:]]
    assert set(resumed) == {r.key for r in rest}
    assert not {f"Question {k}?" for k in returned} & set(resumed_questions)


def test_one_runner_never_pays_twice_for_a_key(api_keys):
    with FakeProviderServer() as server:
        runner = make_runner("gemini_3_flash", server.url, **fast("gemini_3_flash"))
        first = generate_all(runner, requests(3))
        second = generate_all(runner, requests(3))
        assert len(server.calls) == 3
    assert {k: r.text for k, r in first.items()} == {k: r.text for k, r in second.items()}


def test_duplicate_keys_in_one_batch_are_refused(api_keys):
    runner = make_runner("gpt_54_mini", "http://127.0.0.1:9/v1", **fast("gpt_54_mini"))
    with pytest.raises(ValueError, match="duplicate request keys"):
        list(runner.generate(requests(2) + requests(1)))


def test_usage_and_cost_are_totalled_per_runner(api_keys):
    with FakeProviderServer() as server:
        runner = make_runner("claude_sonnet_46", server.url, **fast("claude_sonnet_46"))
        out = generate_all(runner, requests(4))
    totals = runner.cost_summary()
    assert totals["calls"] == 4 and totals["errors"] == 0
    assert totals["input_tokens"] == sum(r.usage["input_tokens"] for r in out.values())
    assert totals["cost_usd"] == pytest.approx(sum(r.provenance["cost_usd"] for r in out.values()), abs=1e-6)


def test_concurrency_settings_reject_unknown_keys_and_bad_ranges():
    with pytest.raises(ValueError, match="unknown concurrency settings \\['max_inflight'\\]"):
        ConcurrencySettings.from_config({"max_inflight": 4})
    with pytest.raises(ValueError, match="min_in_flight <= initial <= max_in_flight"):
        ConcurrencySettings(initial=8, max_in_flight=4)
