"""The runner contract: `Runner` plus optional capabilities a runner declares (runners/base.py), read in one place
(`declared`). A plain plug-in runner (the contract's methods only) still runs an audit; a paid model's answers are
still fsync'd one by one; the wrappers of an API runner forward the contract they wrap, and nothing else."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from facet_probe.runners.api.batch import BatchRunner
from facet_probe.runners.api.openai_compat import OpenAICompatRunner
from facet_probe.runners.base import Capabilities, Runner, declared
from facet_probe.runners.cost.ledger import CostLedger, run_ledger
from facet_probe.runners.cost.paid import paid_runner
from facet_probe.runners.cost.prices import load_price_table
from facet_probe.runners.policies import OraclePolicy
from facet_probe_dev.testing.fake_providers import FakeProviderServer
from facet_probe_dev.testing.in_process import run_module

ROOT = Path(__file__).resolve().parents[2]
AUDIT = ["progress=false", "facet=option_order", "dataset=synthetic_mcq", "limit=2", "k=2"]

#: A model plug-in written against docs/plugins.md: `Runner`'s methods, no base class, no capability.
PLAIN_RUNNER = '''
from facet_probe.runners.base import Response


class PlainRunner:
    def __init__(self, name):
        self.name = name

    def fingerprint(self):
        return {"runner": "plain"}

    def preflight(self):
        pass

    def check_ready(self):
        pass

    def generate(self, requests):
        for request in requests:
            yield request, Response(text="Answer: A")

    def close(self):
        pass
'''


def api_runner() -> OpenAICompatRunner:
    return OpenAICompatRunner(name="local", model_id="m", base_url="http://127.0.0.1:9/v1", verify_model=False,
                              generation={"max_tokens": 8})


def trials_fsyncs(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every fsync of a run's trials file from now on (its name, once per fsync)."""
    seen: list[str] = []
    real = os.fsync

    def fsync(fd: int) -> None:
        name = os.path.basename(os.readlink(f"/proc/self/fd/{fd}"))
        if name == "trials.jsonl":
            seen.append(name)
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    return seen


def test_what_each_kind_of_runner_declares() -> None:
    api = api_runner()
    assert declared(OraclePolicy()) == Capabilities()  # a reference policy: nothing beyond the contract
    assert declared(api).cost is api and declared(api).rekeying is None
    paid = paid_runner("local", api, api, CostLedger(None, None, load_price_table()), batch=False)
    assert declared(paid).cost is paid and declared(paid).batched is None


def test_the_wrappers_forward_the_contract_they_wrap_and_nothing_else(tmp_path: Path) -> None:
    """`PaidRunner` and `BatchRunner` forwarded every attribute by `__getattr__`; now they are runners that declare
    what they offer (the API runner's other attributes are not theirs)."""
    api = api_runner()
    batch = BatchRunner(api, tmp_path / "batches.jsonl")
    paid = paid_runner("local", batch, api, CostLedger(None, None, load_price_table()), batch=True)
    for wrapper in (batch, paid):
        assert isinstance(wrapper, Runner) and wrapper.name == "local"
        assert wrapper.fingerprint() == api.fingerprint()
        assert wrapper.cost_summary() == api.cost_summary()
        assert not hasattr(wrapper, "settings_sent") and not hasattr(wrapper, "legacy_fingerprints")
        wrapper.close()


def test_the_ledger_is_kept_in_the_run_folder_its_caller_names(tmp_path: Path) -> None:
    """`run_ledger` found the run folder through Hydra's global state: outside a Hydra job (the Python API) the
    spend went unrecorded."""
    ledger = run_ledger(tmp_path, 2.0)
    ledger.write()
    assert json.loads((tmp_path / "cost.json").read_text())["budget_usd"] == 2.0
    assert run_ledger(None, None).path is None  # no folder: kept in memory


def test_a_plain_plugin_runner_runs_an_audit_with_grouped_fsync(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "plain_plugin_runner.py").write_text(PLAIN_RUNNER)
    monkeypatch.syspath_prepend(str(tmp_path))
    fsyncs = trials_fsyncs(monkeypatch)
    ran = run_module("facet_probe", f"hydra.run.dir={tmp_path / 'run'}", "model=oracle",
                     "model._target_=plain_plugin_runner.PlainRunner", "store.group_ms=3600000", *AUDIT, cwd=ROOT)
    assert ran.returncode == 0, ran.stderr[-3000:]
    trials = (tmp_path / "run" / "trials.jsonl").read_text().splitlines()
    assert len(trials) == 4 and fsyncs == ["trials.jsonl"]  # the 4 trials in one group, not one fsync each
    status = json.loads((tmp_path / "run" / "run_status.json").read_text())
    assert "cost_this_session" not in status["models"]["oracle"]  # it reports no cost


def test_a_paid_models_answers_are_fsynced_one_by_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fsyncs = trials_fsyncs(monkeypatch)
    with FakeProviderServer() as server:
        ran = run_module("facet_probe", f"hydra.run.dir={tmp_path / 'run'}", "model=gpt_54_mini",
                         f"model.base_url={server.url}/v1", "model.concurrency.backoff_base_s=0.01", *AUDIT,
                         env={"OPENAI_API_KEY": "sk-openai-test-key-0123456789"}, cwd=ROOT)
    assert ran.returncode == 0, ran.stderr[-3000:]
    trials = (tmp_path / "run" / "trials.jsonl").read_text().splitlines()
    assert len(trials) == 4 and len(fsyncs) == len(trials)  # each answer on disk before the next
    status = json.loads((tmp_path / "run" / "run_status.json").read_text())
    assert status["models"]["gpt_54_mini"]["cost_this_session"]["calls"] == 4  # the cost it reports, recorded


class GradientsButNoAttackCheck:
    """White-box methods, but no `attack_config_errors`: a plug-in written before that hook."""

    def encode(self, prompt, target_text=None): ...
    def pixel_inputs(self, images01): ...
    def forward_logits(self, encoded, pixel_inputs, positions): ...
    def generate_text(self, encoded, pixel_inputs, max_new_tokens): ...


def test_a_white_box_class_without_the_attack_check_is_refused_in_one_line() -> None:
    """The attack called `cls.attack_config_errors` on any class with the gradient methods (an AttributeError)."""
    from omegaconf import OmegaConf

    from facet_probe.attack.run import model_node
    from facet_probe.core.errors import ConfigError

    target = f"{__name__}.GradientsButNoAttackCheck"
    with pytest.raises(ConfigError, match="not a local HuggingFace model"):
        model_node(OmegaConf.create({"model": {"_target_": target, "name": "toy"}}))
