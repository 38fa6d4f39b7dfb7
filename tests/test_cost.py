"""The cost estimate before a paid run, `budget_usd=` (stops before it is exceeded, says how far it got) and
the spend in `cost.json`: real audits in a subprocess against the loopback fake provider."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from facet_probe.cost import image_tokens, load_price_table, text_tokens
from facet_probe_dev.testing.fake_providers import FakeProviderServer

ROOT = Path(__file__).resolve().parents[1]
KEYS = {"OPENAI_API_KEY": "sk-openai-test-key-0123456789", "ANTHROPIC_API_KEY": "sk-ant-test-key-0123456789",
        "GOOGLE_API_KEY": "g-test-key-0123456789"}


def audit(tmp: Path, server: FakeProviderServer, *overrides: str, model: str = "gpt_54_mini"):
    url = server.url + ("/v1" if model.startswith("gpt") else "")
    args = [f"hydra.run.dir={tmp / 'run'}", "progress=false", f"model={model}", f"model.base_url={url}",
            "facet=option_order", "dataset=synthetic_mcq", "limit=3", "model.concurrency.backoff_base_s=0.01",
            *overrides]
    env = {**{k: v for k, v in os.environ.items() if k != "HYDRA_FULL_ERROR"}, **KEYS, "HF_HUB_OFFLINE": "1",
           "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, "-m", "facet_probe", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=300)


def trials(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "trials.jsonl").read_text().splitlines()]


def test_the_price_table_is_data_with_its_date_and_source():
    table = load_price_table()
    assert table.date and "http" in table.source
    assert table.models["gpt-5.4-mini"].prices(batch=True).input_per_mtok == pytest.approx(0.375)


def test_token_estimates_follow_the_providers_formulas():
    assert text_tokens("x" * 40, 4.0) == 10
    assert image_tokens("openai", 1024, 1024) == 85 + 170 * 4  # fitted to 768: 2x2 tiles
    assert image_tokens("openai", 1024, 1024, "low") == 85
    assert image_tokens("anthropic", 1000, 1000) == 1334
    assert image_tokens("gemini", 300, 300) == 258 and image_tokens("gemini", 1000, 1000) == 258 * 4


def test_a_paid_run_prints_its_estimate_and_records_what_it_spent(tmp_path):
    with FakeProviderServer() as server:
        proc = audit(tmp_path, server)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "cost estimate gpt_54_mini: 18 calls (interactive)" in proc.stderr
    assert "prices: price table" in proc.stderr
    cost = json.loads((tmp_path / "run" / "cost.json").read_text())
    rows = trials(tmp_path / "run")
    spent = sum(t["provenance"]["cost_usd"] for t in rows)
    assert cost["models"]["gpt_54_mini"]["calls"] == 18
    assert cost["spent_usd"] == pytest.approx(spent, abs=1e-6) and spent > 0
    expected = sum(t["usage"]["input_tokens"] * 0.75 + t["usage"]["output_tokens"] * 4.5 for t in rows) / 1e6
    assert spent == pytest.approx(expected)  # the table's price x the usage each reply reported
    assert cost["models"]["gpt_54_mini"]["estimate"]["high_usd"] >= spent
    assert cost["price_table"]["date"] == load_price_table().date


def test_a_budget_stops_before_it_is_exceeded_and_a_higher_one_continues(tmp_path):
    # each reply ~900 output tokens ($0.00405); a call's ceiling is 1000 output tokens + its input (~$0.0046)
    budget, cap = 0.03, "model.generation.max_output_tokens=1000"
    with FakeProviderServer(reply=lambda call: "Answer: A " + "x" * 3590) as server:
        stopped = audit(tmp_path, server, f"budget_usd={budget}", cap)
        made = len(server.ok_calls())
        cost = json.loads(next((tmp_path / "run").glob("cost.json")).read_text())
        resumed = audit(tmp_path, server, "budget_usd=10", cap)
        calls_after = len(server.ok_calls())
    assert stopped.returncode == 3, stopped.stderr[-3000:]  # incomplete: re-run to continue
    assert "budget_usd=0.03 reached: gpt_54_mini made" in stopped.stderr and "of 18 planned calls" in stopped.stderr
    assert 0 < made < 18
    assert cost["spent_usd"] <= budget and cost["stopped_by_budget"]["calls_done"] == made
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert calls_after == 18  # the second run made only the calls the first did not
    final = json.loads((tmp_path / "run" / "cost.json").read_text())
    assert final["sessions"] == 2 and final["models"]["gpt_54_mini"]["calls"] == 18


def test_a_budget_needs_a_positive_amount(tmp_path):
    with FakeProviderServer() as server:
        proc = audit(tmp_path, server, "budget_usd=-1")
    assert proc.returncode == 2 and "budget_usd=-1" in proc.stderr and "Traceback" not in proc.stderr
