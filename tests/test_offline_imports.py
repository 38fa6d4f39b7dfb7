"""The offline audit imports only what it uses: after a whole run of the default (the tiny VLM on the offline
panel), no package of any extra (Bayesian, provider SDK, quantisation, adapters, tracking) is loaded, so the
default runs on `pip install facet_probe` without extras."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from facet_probe.core.extras import EXTRA_MODULES

ROOT = Path(__file__).resolve().parents[1]
#: What an offline audit never needs: every module of every runtime extra (facet_probe.core.extras): ODI's
#: sampler stack, the API models' SDKs, 4-bit loading, PEFT, tracking.
NOT_NEEDED = tuple(sorted({m for modules in EXTRA_MODULES.values() for m in modules}))

SCRIPT = """
import json, sys
{before}
from facet_probe.__main__ import cli
sys.argv = ["facet-probe", *sys.argv[1:]]
cli()
names = {names!r}
print("LOADED=" + json.dumps(sorted(n for n in names if sys.modules.get(n) is not None)))
"""


def loaded_after_audit(tmp_path: Path, *overrides: str, before: str = "") -> list[str]:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false", "HF_HUB_OFFLINE": "1"}
    code = SCRIPT.format(before=before, names=NOT_NEEDED)
    proc = subprocess.run([sys.executable, "-c", code, "progress=false", f"out_root={tmp_path}", *overrides],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert "run folder:" in proc.stdout  # the audit ran to the end
    (line,) = [x for x in proc.stdout.splitlines() if x.startswith("LOADED=")]
    return json.loads(line.removeprefix("LOADED="))


@pytest.mark.slow
def test_the_offline_default_audit_loads_no_sdk_sampler_or_quantiser(tmp_path):
    assert loaded_after_audit(tmp_path, "limit=1") == []


@pytest.mark.slow
def test_the_check_sees_a_package_that_is_loaded(tmp_path):
    assert loaded_after_audit(tmp_path, "model=oracle", "limit=1", before="import anthropic") == ["anthropic"]


@pytest.mark.slow
def test_the_offline_default_audit_runs_with_no_extra_installed(tmp_path):
    """As if `pip install facet_probe` had installed no extra: Python refuses every module of every extra, and
    the default audit still runs to the end."""
    block = f"for name in {NOT_NEEDED!r}: sys.modules[name] = None"
    assert loaded_after_audit(tmp_path, "limit=1", before=block) == []
