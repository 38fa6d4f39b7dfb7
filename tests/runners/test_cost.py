"""The cost estimate before a paid run, `budget_usd=` (stops before it is exceeded, says how far it got) and
the spend in `cost.json`: real audits (in this process, the shared `run_module`) against the loopback fake provider."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from facet_probe.runners.cost.prices import load_price_table
from facet_probe.runners.cost.tokens import image_tokens, text_tokens
from facet_probe_dev.testing.fake_providers import FakeProviderServer
from facet_probe_dev.testing.in_process import Ran, run_module

ROOT = Path(__file__).resolve().parents[2]
KEYS = {"OPENAI_API_KEY": "sk-openai-test-key-0123456789", "ANTHROPIC_API_KEY": "sk-ant-test-key-0123456789",
        "GOOGLE_API_KEY": "g-test-key-0123456789"}


def audit(tmp: Path, server: FakeProviderServer, *overrides: str, model: str = "gpt_54_mini") -> Ran:
    """A paid audit of 3 items against the fake provider, with test keys, in this process."""
    url = server.url + ("/v1" if model.startswith("gpt") else "")
    args = [f"hydra.run.dir={tmp / 'run'}", "progress=false", f"model={model}", f"model.base_url={url}",
            "facet=option_order", "dataset=synthetic_mcq", "limit=3", "model.concurrency.backoff_base_s=0.01",
            *overrides]
    return run_module("facet_probe", *args, env=KEYS, cwd=ROOT)


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


@pytest.mark.slow
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


# ---------------------------------------------------------------- in-process: the panel, the judge, the report

PANEL = ["progress=false", "facet=option_order", "dataset=synthetic_mcq", "limit=2", "k=2",
         "experiment.models=[gpt_54_mini,gpt_55]", "+experiment.model_settings.concurrency={backoff_base_s: 0.01}"]
LONG = "x" * 3590  # a reply of ~900 output tokens: a call costs something a report shows to the cent


@pytest.fixture
def keys(monkeypatch):
    for key, value in KEYS.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def panel(run: Path, server: FakeProviderServer, *overrides: str):
    from facet_probe import api

    return api.audit([f"hydra.run.dir={run}", *PANEL, f"+experiment.model_settings.base_url={server.url}/v1",
                      *overrides])


def test_a_panel_prints_one_estimate_before_its_first_call(tmp_path, keys, capsys):
    run, ledger_at_first_call = tmp_path / "run", []

    def reply(call):  # the ledger as the first call arrives: every paid model's estimate is in it already
        if not ledger_at_first_call:
            ledger_at_first_call.append(json.loads((run / "cost.json").read_text()))
        return "Answer: A"

    with FakeProviderServer(reply=reply) as server:
        panel(run, server)
        assert len(server.ok_calls()) == 8
    assert set(ledger_at_first_call[0]["models"]) == {"gpt_54_mini", "gpt_55"}
    assert all(m["estimate"]["calls"] == 4 for m in ledger_at_first_call[0]["models"].values())
    err = capsys.readouterr().err
    assert err.count("cost estimate gpt_54_mini: 4 calls") == 1 and err.count("cost estimate gpt_55: 4 calls") == 1
    assert err.count("cost estimate, the whole panel (2 paid models): 8 calls") == 1
    assert err.index("cost estimate gpt_55") < err.index("the whole panel")


def test_a_budget_below_what_the_panels_input_costs_refuses_it_before_any_call(tmp_path, keys):
    from facet_probe.core.errors import ConfigError

    with FakeProviderServer() as server:
        with pytest.raises(ConfigError, match=r"budget_usd=0\.001: the 8 planned calls cost at least \$0\.00\d+ "
                                              r"\(their input tokens alone\).*no call was made"):
            panel(tmp_path / "run", server, "budget_usd=0.001")
        assert server.calls == []


def judged_audit(run: Path, *overrides: str):
    from facet_probe import api

    return api.audit([f"hydra.run.dir={run}", "progress=false", "model=oracle", "facet=mixed_modality_order",
                      "dataset=synthetic_mixed", "limit=3", *overrides])


def judge_reply(call) -> str:
    return f"Verdict: A\nReason: all the same {LONG}"


JUDGE = ["judge=gpt_54_mini", "judge.runner.generation.max_output_tokens=1000",
         "judge.runner.concurrency.backoff_base_s=0.01"]


@pytest.mark.slow  # 1.5 s or more: left out of `make test-fast`
def test_the_judges_calls_count_against_the_audits_budget(tmp_path, keys, capsys):
    from facet_probe.app.boundary import RunIncomplete

    with FakeProviderServer(reply=judge_reply) as server:
        with pytest.raises(RunIncomplete, match="the judge stopped at budget_usd=0.01"):
            judged_audit(tmp_path / "run", *JUDGE, f"judge.runner.base_url={server.url}/v1",
                         "budget_usd=0.01")
        made = len(server.ok_calls())
    cost = json.loads((tmp_path / "run" / "cost.json").read_text())
    assert 0 < made < 3  # three cases; the budget let fewer through
    assert cost["models"]["judge_gpt_54_mini"]["calls"] == made and cost["spent_usd"] <= 0.01
    assert cost["stopped_by_budget"]["model"] == "judge_gpt_54_mini"
    assert "budget_usd=0.01 reached: judge_gpt_54_mini made" in capsys.readouterr().err
    status = json.loads((tmp_path / "run" / "run_status.json").read_text())
    assert status["state"] == "incomplete"


@pytest.mark.slow
def test_the_judge_app_keeps_to_its_own_budget_over_sessions(tmp_path, keys):
    run, said = tmp_path / "run", []
    judged_audit(run)  # the oracle answers; nothing paid yet

    def judge(budget: str) -> int:
        proc = run_module("facet_probe.judge", f"input={run}", *JUDGE, f"judge.runner.base_url={server.url}/v1",
                       f"budget_usd={budget}", env=KEYS, cwd=ROOT)
        said.append(proc.stderr)
        return proc.returncode

    with FakeProviderServer(reply=judge_reply) as server:
        assert judge("0.01") == 3  # incomplete: stopped at the budget
        made = len(server.ok_calls())
        stopped = json.loads((run / "cost.json").read_text())
        assert judge("0.01") == 3 and len(server.ok_calls()) == made  # the same budget, already spent: no call
        assert judge("1") == 0 and len(server.ok_calls()) == 3  # a higher one judges the rest, nothing twice
    assert 0 < made < 3
    assert stopped["models"]["judge_gpt_54_mini"]["spent_usd"] <= 0.01
    final = json.loads((run / "cost.json").read_text())
    assert final["models"]["judge_gpt_54_mini"]["calls"] == 3
    assert "spent by judge_gpt_54_mini on this run folder so far" in "".join(said)  # the judge's own


@pytest.mark.slow
def test_the_report_shows_what_cost_json_recorded_per_model_and_summed_over_folders(tmp_path, keys):
    from facet_probe import api

    with FakeProviderServer(reply=lambda call: f"Answer: A {LONG}") as server:
        for seed in (1, 2):
            audit_args = [f"hydra.run.dir={tmp_path / f'run{seed}'}", "progress=false", "model=gpt_54_mini",
                          f"model.base_url={server.url}/v1", "facet=option_order", "dataset=synthetic_mcq",
                          "limit=2", "k=2", f"seed={seed}", "model.concurrency.backoff_base_s=0.01"]
            api.audit(audit_args)
        combined = api.report([f"input=[{tmp_path / 'run1'},{tmp_path / 'run2'}]", f"out={tmp_path / 'both'}",
                               "bootstrap=10"])
    spent = [json.loads((tmp_path / f"run{s}" / "cost.json").read_text())["spent_usd"] for s in (1, 2)]
    assert all(s > 0.001 for s in spent)
    one = (tmp_path / "run1" / "report.md").read_text()
    assert "**API spend** (`cost.json`" in one and f"${spent[0]:.4f}; per model: gpt_54_mini ${spent[0]:.4f}" in one
    both = (combined.run_dir / "report.md").read_text()
    assert f"${sum(spent):.4f} over 2 run folders; per model: gpt_54_mini ${sum(spent):.4f}" in both
