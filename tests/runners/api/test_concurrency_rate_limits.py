"""Throughput under real rate limits: a 429's wait delays that call, not every call; quota headers pace starts.

Real SDKs against the loopback fake provider's token bucket, in each form a provider answers a 429 with
(whole-second `retry-after`, `retry-after-ms`, none) and with the providers' rate-limit headers. The figures
(share of the limit reached) are the benchmark's (`benchmarks/bench_api_throughput.py`); these tests assert
behaviour: who waits, for how long, and how many 429s come.
"""

from __future__ import annotations

import math
import statistics
from datetime import UTC, datetime, timedelta

import httpx2
import pytest
from api_test_helpers import fast, make_runner, text_prompt, url_for

from facet_probe.runners.api.ratelimit import (
    Quota,
    agreed_rate,
    parse_duration,
    parse_rate_limit_headers,
    parse_reset_time,
)
from facet_probe.runners.base import Request, generate_all
from facet_probe_dev.testing.fake_providers import FakeProviderServer


def requests(n: int) -> list[Request]:
    return [Request(key=f"q{i}", prompt=text_prompt(f"q{i}"), seed=i) for i in range(n)]


def limited_runner(config: str, server: FakeProviderServer, **overrides):
    settings = {"concurrency.initial": 4, "concurrency.max_in_flight": 16, "concurrency.max_retries": 30,
                "concurrency.backoff_base_s": 2.0, "concurrency.backoff_max_s": 60.0, **overrides}
    return make_runner(config, url_for(config, server.url), **fast(config, **settings))


def retry_delays(server: FakeProviderServer) -> list[float]:
    """For each rate-limited call, seconds until the same question came back."""
    delays = []
    for i, call in enumerate(server.calls):
        if call.fault == "rpm_limit":
            again = next(c for c in server.calls[i + 1:] if c.texts() == call.texts())
            delays.append(again.arrived_at - call.arrived_at)
    return delays


@pytest.mark.slow
@pytest.mark.parametrize("config", ["claude_sonnet_46", "gpt_54_mini"])
def test_whole_second_retry_after_delays_the_rejected_call_but_others_keep_flowing(config, api_keys):
    with FakeProviderServer(rps_limit=20, burst=2, latency_s=0.05, retry_after_form="seconds") as server:
        out = generate_all(limited_runner(config, server), requests(60))
    assert all(r.error is None for r in out.values())
    answered_at = next(c for c in server.calls if c.ok).arrived_at + 0.1  # the engine knows a call's latency
    t = next(c for c in server.calls if c.fault == "rpm_limit" and c.arrived_at > answered_at).arrived_at
    during = [c for c in server.calls if c.ok and t + 0.1 < c.arrived_at < t + 0.9]
    assert len(during) >= 5  # the old engine started nothing for the whole second
    assert min(retry_delays(server)) >= 1.0  # the rejected call itself honoured "not before 1 s"


@pytest.mark.slow
def test_a_429_without_a_hint_is_retried_after_a_short_backoff_not_the_configured_seconds(api_keys):
    with FakeProviderServer(rps_limit=20, burst=2, latency_s=0.05, retry_after_form="none") as server:
        out = generate_all(limited_runner("gpt_54_mini", server), requests(60))
    assert all(r.error is None for r in out.values())
    delays = retry_delays(server)
    assert len(delays) >= 5
    assert statistics.median(delays) < 0.5  # backoff_base_s=2 alone gives a median near 1 s


@pytest.mark.slow
@pytest.mark.parametrize("config", ["claude_sonnet_46", "gpt_54_mini", "openai_compat"])
def test_rate_limit_headers_pace_starts_so_the_429_rarely_comes(config, api_keys):
    with FakeProviderServer(rps_limit=20, burst=2, latency_s=0.05, retry_after_form="seconds",
                            rate_limit_headers=True) as server:
        runner = limited_runner(config, server, **{"concurrency.initial": 2})
        out = generate_all(runner, requests(40))
    assert all(r.error is None for r in out.values())
    assert server.fault_counts().get("rpm_limit", 0) <= 1  # unpaced, AIMD probes into many 429s
    assert runner.last_stats.quota_reports == runner.last_stats.attempts
    assert runner.last_stats.header_waits > 0


@pytest.mark.slow
@pytest.mark.parametrize("config, headers", [("claude_sonnet_46", True), ("gpt_54_mini", True),
                                             ("gpt_54_mini", False)])  # the last: without headers, 429s
def test_a_token_limit_reported_in_headers_paces_starts_too(config, headers, api_keys):
    """Each call costs 10-17 tokens (with thinking) of a 200 tokens/s bucket of 40; requests are not limited. (A
    bucket of 20, a call costing 85% of it, leaves the pacing's margin no room: on a client slow to send a
    call, one more 429 then comes, docs/providers.md.)"""
    with FakeProviderServer(tokens_per_s_limit=200, token_burst=40, latency_s=0.05, retry_after_form="seconds",
                            rate_limit_headers=headers) as server:
        runner = limited_runner(config, server, **{"concurrency.initial": 2})
        out = generate_all(runner, requests(40))
    assert all(r.error is None for r in out.values())
    assert len({r.usage["input_tokens"] + r.usage["output_tokens"] for r in out.values()}) == 1  # a fixed cost
    n429 = server.fault_counts().get("rpm_limit", 0)
    assert (n429 <= 1) if headers else (n429 > 1)


@pytest.mark.slow
def test_without_headers_the_same_run_does_meet_429s(api_keys):
    """The control for the test above: the same limit without headers is found by 429s."""
    with FakeProviderServer(rps_limit=20, burst=2, latency_s=0.05, retry_after_form="seconds") as server:
        runner = limited_runner("gpt_54_mini", server, **{"concurrency.initial": 2})
        generate_all(runner, requests(40))
    assert server.fault_counts().get("rpm_limit", 0) > 1
    assert runner.last_stats.quota_reports == 0


@pytest.mark.parametrize("form, sent, absent", [
    ("seconds", {"retry-after": "1"}, "retry-after-ms"),
    ("ms", {}, "retry-after"),
    ("none", {}, "retry-after-ms"),
])
def test_the_fake_server_answers_429_in_the_form_asked(form, sent, absent):
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    with (FakeProviderServer(rps_limit=1, burst=1, retry_after_form=form, rate_limit_headers=True) as server,
          httpx2.Client() as client):
        first, second = (client.post(server.url + "/v1/chat/completions", json=body) for _ in range(2))
    assert first.status_code == 200 and second.status_code == 429
    assert all(second.headers.get(k) == v for k, v in sent.items()) and absent not in second.headers
    if form == "ms":
        assert 0 < int(second.headers["retry-after-ms"]) <= 1000
    report = parse_rate_limit_headers(second.headers)
    assert report.requests.limit == 1 and report.requests.remaining == 0 and 0 < report.requests.reset_s <= 1


def test_duration_and_reset_time_parsing():
    assert parse_duration("6m0s") == 360 and parse_duration("1.5s") == 1.5
    assert parse_duration("250ms") == pytest.approx(0.25) and parse_duration("1h2m3s") == 3723
    assert parse_duration("soon") is None and parse_duration("12") is None
    now = datetime(2026, 12, 1, 10, 0, 0, tzinfo=UTC)
    assert parse_reset_time("2026-12-01T10:00:30Z", now) == 30
    assert parse_reset_time("2026-12-01T09:59:00Z", now) == -60
    assert parse_reset_time("tomorrow", now) is None


def test_rate_limit_headers_of_both_providers_are_read():
    now = datetime(2026, 12, 1, 10, 0, 0, tzinfo=UTC)
    openai = parse_rate_limit_headers({
        "x-ratelimit-limit-requests": "5000", "x-ratelimit-remaining-requests": "4999",
        "x-ratelimit-reset-requests": "12ms", "x-ratelimit-limit-tokens": "160000",
        "x-ratelimit-remaining-tokens": "159976", "x-ratelimit-reset-tokens": "6m0s"})
    assert openai.requests == Quota(5000, 4999, 0.012) and openai.tokens == Quota(160000, 159976, 360)
    reset = (now + timedelta(seconds=2)).isoformat().replace("+00:00", "Z")
    anthropic = parse_rate_limit_headers({
        "anthropic-ratelimit-requests-limit": "50", "anthropic-ratelimit-requests-remaining": "0",
        "anthropic-ratelimit-requests-reset": reset}, now)
    assert anthropic.requests == Quota(50, 0, 2.0, absolute=True) and anthropic.tokens is None
    assert anthropic.requests.as_of(0.5).reset_s == 2.5  # a time of day: counted from the call's admission
    read_late = parse_rate_limit_headers({"anthropic-ratelimit-requests-limit": "50",
                                          "anthropic-ratelimit-requests-remaining": "0",
                                          "anthropic-ratelimit-requests-reset": "2026-12-01T09:59:59.9Z"}, now)
    assert read_late.requests.as_of(0.3).reset_s == pytest.approx(0.2)  # full 0.2 s after admission
    assert anthropic.requests.refill_bounds == pytest.approx((49 / 2, 50 / 2))
    azure_placeholders = {"x-ratelimit-limit-tokens": "-1", "x-ratelimit-remaining-tokens": "-1",
                          "x-ratelimit-reset-tokens": "0"}
    assert parse_rate_limit_headers(azure_placeholders) is None
    assert parse_rate_limit_headers({"content-type": "application/json"}) is None


def test_the_refill_rate_is_what_reports_rounded_down_all_allow():
    """A 4-call bucket refilling at 20/s, reported at several levels: whole calls left, ms resets."""
    levels = [0.2, 0.55, 0.9, 1.3, 2.7, 3.05]
    bounds = [Quota(4, math.floor(t), round((4 - t) / 20, 3)).refill_bounds for t in levels]
    assert agreed_rate(bounds) == pytest.approx(20, rel=0.03)
    assert agreed_rate([(10, 12), (20, 22), (14, 16)]) == 15  # they disagree (the limit changed): the median
