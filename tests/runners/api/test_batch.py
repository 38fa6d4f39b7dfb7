"""Batch APIs through the real SDKs against the loopback fake: the requests inside a batch equal what the
interactive runner sends, results come back as interactive replies do, batch ids are recorded, a failed
request is retried in a new batch, and a second run collects an open batch instead of submitting again."""

from __future__ import annotations

import json

import pytest
from api_test_helpers import fast, interleaved_prompt, make_runner, text_prompt, url_for

from facet_probe.runners.api.batch import BatchLog, BatchRunner
from facet_probe.runners.base import Request, generate_all
from facet_probe_dev.testing.fake_providers import FakeProviderServer

CONFIGS = ["gpt_54_mini", "claude_sonnet_46", "gemini_3_flash"]


def requests(images, n: int = 3) -> list[Request]:
    reqs = [Request(key=f"k{i:02d}", prompt=text_prompt(f"q{i}"), seed=100 + i) for i in range(n)]
    return [*reqs, Request(key="kimg", prompt=interleaved_prompt(images, "img"), seed=7)]


def wire(call) -> dict:
    """A request body as it reached the server, less the model (a Gemini batch names it once, in the URL)."""
    return {k: v for k, v in call.body.items() if k != "model"}


@pytest.mark.parametrize("config", CONFIGS)
def test_a_batch_sends_what_the_interactive_runner_sends(config, api_keys, images, tmp_path):
    reqs = requests(images)
    with FakeProviderServer() as server:
        runner = make_runner(config, url_for(config, server.url), **fast(config))
        interactive = generate_all(runner, reqs)
        sent = {c.texts()[-1]: wire(c) for c in server.calls}
        server.calls.clear()
        batch = BatchRunner(make_runner(config, url_for(config, server.url), **fast(config)),
                            tmp_path / "batches" / "m.jsonl", poll_s=0.01)
        batched = generate_all(batch, reqs)
        in_batch = {c.texts()[-1]: wire(c) for c in server.calls if c.path.startswith("batch:")}
    assert in_batch == sent  # every setting, the prompt translation and the per-call seed, on the wire
    assert set(batched) == {r.key for r in reqs}
    for key, resp in batched.items():
        assert resp.error is None and resp.text == interactive[key].text
        assert resp.usage == interactive[key].usage
        assert resp.provenance["batch_id"].removeprefix("batches/") in server.batches.jobs
        engine = ("batch_id", "batch_api", "response_id", "attempts")  # how the call travelled, not what it was
        same = {k: v for k, v in resp.provenance.items() if k not in engine}
        assert same == {k: v for k, v in interactive[key].provenance.items() if k not in engine}
    record = BatchLog.open(tmp_path / "batches" / "m.jsonl")
    assert {b.removeprefix("batches/") for b in record.submitted} == set(server.batches.jobs) and record.collected == set(record.submitted)


@pytest.mark.parametrize("config", CONFIGS)
def test_a_failed_request_is_retried_in_a_new_batch(config, api_keys, images, tmp_path):
    failed_once: set[str] = set()

    def fail_first_time(call) -> bool:
        tag = call.texts()[-1]
        if tag.startswith("Question q1") and tag not in failed_once:
            failed_once.add(tag)
            return True
        return False

    with FakeProviderServer(batch_fail=fail_first_time) as server:
        batch = BatchRunner(make_runner(config, url_for(config, server.url), **fast(config)),
                            tmp_path / "b.jsonl", poll_s=0.01)
        out = generate_all(batch, requests(images))
        submitted = server.batches.submitted_keys()
    assert all(r.error is None for r in out.values())
    assert sorted(submitted) == sorted([*out, "k01"])  # only the failed request went out again
    assert len(server.batches.jobs) == 2


def test_out_of_rounds_is_an_error_response_for_the_next_run(api_keys, images, tmp_path):
    with FakeProviderServer(batch_fail=lambda call: "q1" in call.texts()[-1]) as server:
        batch = BatchRunner(make_runner("claude_sonnet_46", server.url, **fast("claude_sonnet_46")),
                            tmp_path / "b.jsonl", poll_s=0.01, max_rounds=2)
        out = generate_all(batch, requests(images))
    assert out["k01"].error and "errored" in out["k01"].error
    assert all(out[k].error is None for k in out if k != "k01")
    assert server.batches.submitted_keys().count("k01") == 2


def test_a_second_run_collects_an_open_batch_instead_of_submitting_again(api_keys, images, tmp_path):
    reqs = requests(images)
    log_path = tmp_path / "b.jsonl"
    with FakeProviderServer(batch_polls=50) as server:
        first = BatchRunner(make_runner("gpt_54_mini", server.url + "/v1", **fast("gpt_54_mini")), log_path,
                            poll_s=0.01, wait=False)
        assert generate_all(first, reqs) == {}  # submitted, still running: nothing to store yet
        open_ids = set(BatchLog.open(log_path).open_batches())
        assert open_ids == set(server.batches.jobs)
        server.batch_polls = 0
        again = BatchRunner(make_runner("gpt_54_mini", server.url + "/v1", **fast("gpt_54_mini")), log_path,
                            poll_s=0.01)
        out = generate_all(again, reqs[1:])  # what the store still lacks
    assert set(out) == {r.key for r in reqs[1:]}
    assert len(server.batches.jobs) == 1 and sorted(server.batches.submitted_keys()) == sorted(r.key for r in reqs)
    lines = [json.loads(line) for line in log_path.read_text().splitlines()]
    assert [rec["event"] for rec in lines] == ["submitted", "collected"]


def test_a_budget_counts_calls_sent_in_an_open_batch(api_keys, images, tmp_path):
    """batch.wait=false leaves batches open: their calls' ceilings stay reserved, so a budget never lets more
    batches out than it could pay for."""
    from facet_probe.runners.cost.ledger import CostLedger
    from facet_probe.runners.cost.paid import paid_runner
    from facet_probe.runners.cost.prices import load_price_table

    reqs = [Request(key=f"k{i:02d}", prompt=text_prompt(f"q{i}")) for i in range(10)]
    with FakeProviderServer(batch_polls=50) as server:
        api = make_runner("gpt_54_mini", server.url + "/v1", **fast("gpt_54_mini"))
        ledger = CostLedger(tmp_path / "cost.json", 0.05, load_price_table())  # ~2.7 calls at 8192 tokens
        batch = BatchRunner(api, tmp_path / "b.jsonl", poll_s=0.01, wait=False)
        assert generate_all(paid_runner("gpt_54_mini", batch, api, ledger, batch=True), reqs) == {}
        submitted = server.batches.submitted_keys()
    assert 0 < len(submitted) <= 2 and json.loads((tmp_path / "cost.json").read_text())["stopped_by_budget"]
