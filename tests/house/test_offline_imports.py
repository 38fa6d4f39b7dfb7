"""The offline audit imports only what it uses: after a whole run of the default (the tiny VLM on the offline
panel), no package of any extra (Bayesian, provider SDK, quantisation, adapters, tracking) is loaded, so the
default runs on `pip install facet_probe` without extras. Start-up imports only what it needs too: `--help` loads
no model, table or plotting library, and an oracle audit reaches its calls without torch, matplotlib or an SDK,
composing its config once (issue 64)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from facet_probe.core.extras import EXTRA_MODULES

ROOT = Path(__file__).resolve().parents[2]
#: What an offline audit never needs: every module of every runtime extra (facet_probe.core.extras): ODI's
#: sampler stack, the API models' SDKs, 4-bit loading, PEFT, tracking.
NOT_NEEDED = tuple(sorted({m for modules in EXTRA_MODULES.values() for m in modules}))
#: What start-up never needs (the goals: `--help` within 1.5 s, an oracle audit's first call within 3 s): the
#: extras, the model libraries and the plotting library; `--help` needs no table library either.
NOT_AT_START = (*NOT_NEEDED, "torch", "transformers", "matplotlib")
NOT_FOR_HELP = (*NOT_AT_START, "pandas", "pyarrow", "httpx2")

SCRIPT = """
import json, sys
{before}
from facet_probe.__main__ import cli
sys.argv = ["facet-probe", *sys.argv[1:]]
cli()
names = {names!r}
print("LOADED=" + json.dumps(sorted(n for n in names if sys.modules.get(n) is not None)))
"""


#: Run before the audit: once a model's calls are made (`execute.run_model` returns, before the report), which of
#: `NOT_AT_START` are loaded ("AT_CALLS="), then `import anthropic` (the check after the run must see it); and how
#: many times Hydra composed the app's primary config ("PRIMARY_COMPOSES=").
AT_CALLS = """
import atexit
from facet_probe.audit import execute
from hydra._internal.config_loader_impl import ConfigLoaderImpl
composes = []
load_configuration = ConfigLoaderImpl.load_configuration
def counted(self, config_name, *args, **kwargs):
    composes.append(config_name)
    return load_configuration(self, config_name, *args, **kwargs)
ConfigLoaderImpl.load_configuration = counted
run_model = execute.run_model
def seen(*args, **kwargs):
    counts = run_model(*args, **kwargs)
    print("AT_CALLS=" + json.dumps(sorted(n for n in {at_start!r} if sys.modules.get(n) is not None)))
    import anthropic
    return counts
execute.run_model = seen
atexit.register(lambda: print(f"PRIMARY_COMPOSES={{composes.count('config')}}"))
"""


def audit_output(tmp_path: Path, *overrides: str, before: str = "") -> str:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false", "HF_HUB_OFFLINE": "1"}
    code = SCRIPT.format(before=before, names=NOT_NEEDED)
    proc = subprocess.run([sys.executable, "-c", code, "progress=false", f"out_root={tmp_path}", *overrides],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert "run folder:" in proc.stdout  # the audit ran to the end
    return proc.stdout


def printed(output: str, key: str):
    (line,) = [x for x in output.splitlines() if x.startswith(f"{key}=")]
    return json.loads(line.removeprefix(f"{key}="))


def loaded_after_audit(tmp_path: Path, *overrides: str, before: str = "") -> list[str]:
    return printed(audit_output(tmp_path, *overrides, before=before), "LOADED")


@pytest.mark.slow
def test_the_offline_default_audit_loads_no_sdk_sampler_or_quantiser(tmp_path):
    assert loaded_after_audit(tmp_path, "limit=1") == []


@pytest.mark.slow
def test_an_oracle_audit_calls_before_loading_a_model_or_plotting_library_and_composes_once(tmp_path):
    """Its calls come before torch, transformers, matplotlib or any extra is loaded, after one composition of the
    config (Hydra's own entry composes it once more, only to read `hydra.mode`); the check after the run sees
    `anthropic`, which the hook imported after the calls."""
    output = audit_output(tmp_path, "model=oracle", "limit=1", before=AT_CALLS.format(at_start=NOT_AT_START))
    assert printed(output, "AT_CALLS") == []
    assert printed(output, "PRIMARY_COMPOSES") == 1
    assert printed(output, "LOADED") == ["anthropic"]


def test_help_loads_no_model_table_or_plotting_library():
    """`facet-probe --help` (the console script's function) in a fresh interpreter: the help, and none of the
    libraries a run needs; Hydra lists only this app's groups (not every group of every app: most of its time)."""
    code = ("import json, sys\nfrom facet_probe.__main__ import cli\nsys.argv = ['facet-probe', '--help']\n"
            "try:\n    cli()\nexcept SystemExit as exc:\n    assert exc.code in (0, None), exc.code\n"
            f"print('LOADED=' + json.dumps(sorted(n for n in {NOT_FOR_HELP!r} if n in sys.modules)))")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert proc.returncode == 0, proc.stderr
    assert "== Config groups (group=option) ==" in proc.stdout and "model (now tiny_vlm):" in proc.stdout
    assert printed(proc.stdout, "LOADED") == []


@pytest.mark.slow
def test_the_offline_default_audit_runs_with_no_extra_installed(tmp_path):
    """As if `pip install facet_probe` had installed no extra: Python refuses every module of every extra, and
    the default audit still runs to the end."""
    block = f"for name in {NOT_NEEDED!r}: sys.modules[name] = None"
    assert loaded_after_audit(tmp_path, "limit=1", before=block) == []
