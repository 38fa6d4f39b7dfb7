"""Start-up and the per-call path stay lean (issue 64): the closing line's timeline, Hydra's command line composing a
run's config once and filling only the help variables a template names, a panel's configs composed in one go, a
trial stored without copying it first, and an API model without the batch API importing no other provider's SDK.
The process-level checks (what `--help` and an oracle audit import, one composition) are in test_offline_imports.py.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import asdict, dataclass

import pytest
from hydra.types import RunMode
from omegaconf import OmegaConf

from facet_probe.app import timeline
from facet_probe.app.boundary import help_text, mode_on_command_line
from facet_probe.config import loading
from facet_probe.core.trials import Trial


def test_the_closing_line_says_the_time_to_the_first_call_and_after_the_last_answer():
    line = timeline.Timeline(started=100.0)
    line.calls(102.0, 110.0)
    line.calls(111.0, 130.0)  # a panel's second model: the first call stays the first, the last answer moves
    assert line.line(now=131.5) == "first call after 2.0 s, 1.5 s after the last answer (31.5 s in all)"
    assert timeline.Timeline(started=0.0).line(now=3.0) == "no call made (3.0 s in all)"


def test_the_first_run_of_a_command_line_counts_from_the_process_start_and_a_later_one_from_its_own():
    started = timeline.process_started()
    assert started <= timeline._IMPORTED  # this module was imported after the process started
    timeline.from_process_start()
    assert timeline.Timeline().started == pytest.approx(started, abs=0.05)
    assert timeline.Timeline().started > time.monotonic() - 1  # a sweep's next job: its own start


def test_the_run_mode_comes_from_the_command_line():
    assert mode_on_command_line(None, "config", ["model=oracle"]) is None  # left to -m
    assert mode_on_command_line(None, "config", ["hydra.mode=MULTIRUN", "k=2,3"]) is RunMode.MULTIRUN
    assert mode_on_command_line(None, "config", ["hydra.mode=bogus"]) is None  # Hydra says what is wrong


class CountingHydra:
    """What `help_text` asks of Hydra: each listing or dump it makes is counted."""

    def __init__(self) -> None:
        self.made: list[str] = []

    def format_args_help(self, parser) -> str:
        self.made.append("flags")
        return "--help"

    def format_config_groups(self, predicate) -> str:
        self.made.append("groups")
        return "model: a, b"


def test_help_makes_only_the_variables_its_template_names():
    hydra, cfg = CountingHydra(), OmegaConf.create({"k": 6})
    ours = OmegaConf.create({"template": "About.\n$CONFIG"})
    assert help_text(hydra, ours, cfg, None, resolve=False) == "About.\nk: 6\n"
    assert hydra.made == []  # no group listing: most of Hydra's own --help time
    hydras = OmegaConf.create({"template": "$FLAGS_HELP\n$HYDRA_CONFIG_GROUPS\n$APP_CONFIG_GROUPS"})
    assert help_text(hydra, hydras, cfg, None, resolve=False) == "--help\nmodel: a, b\nmodel: a, b"
    assert hydra.made == ["flags", "groups", "groups"]


def test_a_panels_configs_are_composed_in_one_go_as_each_alone(monkeypatch):
    names = {"facet": ["option_order", "evidence_chunk_order"], "dataset": ["synthetic_mcq"], "model": ["oracle"]}
    monkeypatch.setattr(loading, "_COMPOSED", {})
    alone = {(g, n): OmegaConf.to_container(loading.load_option(g, n)) for g, ns in names.items() for n in ns}
    monkeypatch.setattr(loading, "_COMPOSED", {})
    composes = []
    compose = loading.compose
    monkeypatch.setattr(loading, "compose", lambda **kw: composes.append(kw) or compose(**kw))
    loading.prefetch({**names, "dataset": [*names["dataset"], "no_such_dataset"]})  # unknown: left to load_option
    assert len(composes) == 1
    for (group, name), node in alone.items():
        got = loading.load_option(group, name)
        assert OmegaConf.to_container(got) == node and OmegaConf.is_struct(got)
    assert len(composes) == 1  # every one was found composed


def test_an_option_holding_an_interpolation_is_composed_alone(monkeypatch):
    """`model=tiny_vlm` reads `${fp_asset:...}`: composed at another package, an absolute interpolation would
    resolve elsewhere, so prefetch leaves it to its own compose."""
    monkeypatch.setattr(loading, "_COMPOSED", {})
    loading.prefetch({"model": ["tiny_vlm", "oracle"]})
    cached = {key[2] for key in loading._COMPOSED if key[0] == "option"}
    assert cached == {"oracle"}


@dataclass
class Detail:
    kind: str
    n: int


def test_a_trial_is_stored_as_its_fields_were_before_without_copying_them():
    trial = Trial(trial_key="t", call_key="c", model="m", facet="f", dataset="d", item_id="i", ordering_idx=0,
                  repeat_idx=0, permutation=[1, 0], component_ids=["b", "a"], prompt_hash="p", mode="direct",
                  raw_output="Answer: ü", usage={"input_tokens": 3}, provenance={"detail": Detail("x", 2)})
    assert trial.to_json() == json.dumps(asdict(trial), ensure_ascii=False, sort_keys=True)
    trial.provenance["bad"] = object()
    with pytest.raises(TypeError, match="not JSON serializable"):
        trial.to_json()


def test_an_api_model_without_the_batch_api_imports_no_other_providers_sdk(monkeypatch):
    """`runners.api.batch` imports every provider's SDK (about 2 s of a loaded machine's start-up): only a run with
    `batch.enabled` needs it."""
    from facet_probe.runners.api.openai_compat import OpenAICompatRunner
    from facet_probe.runners.cost.ledger import CostLedger
    from facet_probe.runners.cost.paid import PaidRunner, paid_model
    from facet_probe.runners.cost.prices import load_price_table

    monkeypatch.setitem(sys.modules, "facet_probe.runners.api.batch", None)  # importing it now fails
    runner = OpenAICompatRunner(name="local", model_id="m", base_url="http://127.0.0.1:9/v1", verify_model=False,
                                generation={"max_tokens": 8})
    ledger = CostLedger(None, None, load_price_table())
    paid = paid_model("local", runner, OmegaConf.create({"batch": {"enabled": False}}), ledger)
    assert isinstance(paid, PaidRunner)
