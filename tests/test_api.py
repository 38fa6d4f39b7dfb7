"""facet_probe.api: the apps called from Python return the folder and the tables their command lines write
for the same overrides, refuse a bad override with the command line's message, and need no Hydra runtime."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
import pytest

import facet_probe
from facet_probe import api
from facet_probe.core.errors import ConfigError
from facet_probe_dev.testing.in_process import Ran, run_module

pytestmark = pytest.mark.slow  # its fixtures alone take seconds (a real run or fit)

ROOT = Path(__file__).resolve().parents[1]
AUDIT = ["model=oracle", "limit=2", "progress=false"]


def cli(module: str, *overrides: str, check: bool = True) -> Ran:
    """The command line, run in this process (`run_module`) from the checkout's root."""
    proc = run_module(module, *overrides, cwd=ROOT)
    if check and proc.returncode != 0:
        raise AssertionError(f"{module} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc


def cli_frames(folder: Path) -> dict[str, pd.DataFrame]:
    return {p.stem: pd.read_csv(p) for p in sorted(folder.glob("*.csv"))}


def assert_same_frames(got: dict[str, pd.DataFrame], want: dict[str, pd.DataFrame]) -> None:
    assert sorted(got) == sorted(want) and want
    for name in want:
        pd.testing.assert_frame_equal(got[name], want[name], obj=name)


@pytest.fixture(scope="module")
def audits(tmp_path_factory) -> tuple[Path, api.RunResult]:
    """The offline default on the oracle, once by the command line and once from Python."""
    root = tmp_path_factory.mktemp("audits")
    cli("facet_probe", *AUDIT, f"out_root={root / 'cli'}")
    (cli_dir,) = (root / "cli").glob("*/*/*")
    return cli_dir, api.audit([*AUDIT, f"out_root={root / 'api'}"])


def test_audit_from_python_returns_the_run_folder_and_tables_the_cli_wrote(audits):
    cli_dir, result = audits
    assert result.run_dir.is_dir() and result.run_dir.relative_to(result.run_dir.parents[2]) == \
        cli_dir.relative_to(cli_dir.parents[2])  # the same run folder name under each out_root
    assert (result.run_dir / ".hydra" / "overrides.yaml").is_file()  # Hydra's job runner, as on the command line
    assert_same_frames(result.frames, cli_frames(cli_dir))
    assert result["summary"]["flip_rate"].notna().all()


def test_package_exports_the_api_under_names_no_module_takes(audits):
    import facet_probe.audit.plan  # noqa: F401  (a module named like a function must not replace it)

    assert facet_probe.run_audit is api.audit and facet_probe.run_report is api.report
    assert facet_probe.RunResult is api.RunResult


def test_report_from_python_matches_the_cli(audits, tmp_path):
    cli_dir, _ = audits
    cli("facet_probe.report", f"input='{cli_dir}'", f"out={tmp_path / 'cli'}", "bootstrap=50")
    result = facet_probe.run_report({"input": str(cli_dir), "out": str(tmp_path / "api"), "bootstrap": 50})
    assert result.run_dir == tmp_path / "api"
    assert_same_frames(result.frames, cli_frames(tmp_path / "cli"))


def test_paper_target_from_python_matches_the_cli(audits, tmp_path):
    cli_dir, _ = audits
    common = ["target=table-k-ablation", f"input='{cli_dir}'", "bootstrap=50"]
    cli("facet_probe.paper", *common, f"out={tmp_path / 'cli'}")
    result = facet_probe.run_paper([*common, f"out={tmp_path / 'api'}"])
    assert result.run_dir == tmp_path / "api"
    assert_same_frames(result.frames, cli_frames(tmp_path / "cli"))


def test_odi_dry_run_from_python_checks_the_input_and_writes_nothing(audits, tmp_path):
    cli_dir, _ = audits
    result = facet_probe.run_odi([f"input='{cli_dir}'", "dry_run=true", f"out={tmp_path / 'odi'}"])
    assert result.run_dir is None and result.frames == {} and not (tmp_path / "odi").exists()
    with pytest.raises(ConfigError, match="outcome"):
        facet_probe.run_odi([f"input='{cli_dir}'", "outcome=sideways", "dry_run=true"])


@pytest.mark.parametrize("bad", ["model=no_such_model", "limit=abc", "no_such_key=1", "model.no_such=1"])
def test_a_bad_override_is_the_cli_s_one_message(bad, tmp_path):
    proc = cli("facet_probe", "model=oracle", bad, f"out_root={tmp_path}", check=False)
    assert proc.returncode == 2 and proc.stderr.startswith("error: ")
    with pytest.raises(ConfigError) as raised:
        api.audit(["model=oracle", bad, f"out_root={tmp_path}"])
    assert f"error: {raised.value}" == proc.stderr.strip()
    assert not list(tmp_path.iterdir())  # refused before any folder is made


@dataclass
class Prompt:
    cot: bool = False


@dataclass
class Settings:
    model: str = "tiny_vlm"
    limit: int | None = None
    prompt: Prompt = field(default_factory=Prompt)
    out_root: str = "outputs"


def test_a_dict_and_a_dataclass_are_the_same_overrides_as_the_command_line():
    assert api.overrides_of({"model": "oracle", "limit": 2, "prompt": {"cot": True}, "out_root": "/tmp/a b"}) \
        == ["model=oracle", "limit=2", "prompt.cot=true", "out_root='/tmp/a b'"]
    assert api.overrides_of(Settings(model="oracle", limit=2, prompt=Prompt(cot=True))) \
        == ["model=oracle", "limit=2", "prompt.cot=true"]  # fields left at their defaults are not overrides
    assert api.overrides_of({"seed": 7, "input": ["a", "b/c"], "judge": None, "title": "true"}) \
        == ["seed=7", "input=[a,b/c]", "judge=null", "title='true'"]
    with pytest.raises(ConfigError, match="list of overrides"):
        api.overrides_of("model=oracle")


def test_a_dataclass_class_instead_of_an_instance_is_one_line():
    with pytest.raises(ConfigError, match=r"config Settings: give an instance \(Settings\(\.\.\.\)\), not the class"):
        api.overrides_of(Settings)


def test_a_run_from_python_leaves_no_hydra_state_behind(audits):
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.hydra_config import HydraConfig

    assert not GlobalHydra.instance().is_initialized() and not HydraConfig.initialized()


def test_attack_from_python_matches_the_cli(tmp_path):
    common = ["attack=answer", "limit=2", "attack.steps=2", "attack.update_every=2", "max_new_tokens=16"]
    cli("facet_probe.attack", *common, f"out_root={tmp_path / 'cli'}")
    result = facet_probe.run_attack([*common, f"out_root={tmp_path / 'api'}"])
    (cli_dir,) = [p for p in (tmp_path / "cli" / "attack").glob("*/*/*/*") if p.is_dir()]
    assert result.run_dir.relative_to(tmp_path / "api") == cli_dir.relative_to(tmp_path / "cli")
    got, want = result.frames, cli_frames(cli_dir)
    timings = [c for c in want["samples"].columns if c.endswith(("_s", "seconds"))]  # wall-clock, not results
    got["samples"], want["samples"] = got["samples"].drop(columns=timings), want["samples"].drop(columns=timings)
    assert_same_frames(got, want)


def test_a_printed_result_names_its_tables_and_their_shapes_not_their_rows():
    """`print(run_report(...))` in a notebook: the folder and a line of tables, not every DataFrame's rows."""
    frames = {"summary": pd.DataFrame({"model": ["oracle"] * 6, "flip_rate": 0.0}),
              "item_metrics": pd.DataFrame({"item_id": [f"synthetic_mcq::{i}" for i in range(1200)]})}
    text = repr(api.RunResult(Path("/runs/oracle"), frames))
    assert text == "RunResult(run_dir='/runs/oracle', frames={summary: 6x2, item_metrics: 1200x1})"
    assert str(api.RunResult(None)) == "RunResult(run_dir=None, frames={})"


def test_the_judge_from_a_fresh_python_resolves_its_config(tmp_path):
    """`facet_probe.run_judge(...)` from a Python where nothing registered the project's resolvers failed with
    `UnsupportedInterpolationType fp_first_path` (judge_app.yaml's hydra.run.dir): it got as far as the input."""
    from omegaconf import OmegaConf

    from facet_probe.config import schema

    OmegaConf.clear_resolver("fp_first_path")  # as in a fresh process: only the judge's main() registered it
    try:
        with pytest.raises(FileNotFoundError, match="holds neither trials"):
            facet_probe.run_judge([f"input={tmp_path}", "judge=gpt_54_mini"])
    finally:
        schema.register()
