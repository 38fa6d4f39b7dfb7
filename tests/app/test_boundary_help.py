"""The console scripts exist, and each app's `--help` is a paragraph about that app with only its own groups."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from facet_probe_dev.testing.in_process import run_argv

SCRIPTS = Path(sys.executable).parent  # `pip install -e .` puts the console scripts beside the interpreter
#: The one script run as installed, in a process of its own: the file itself is what starts the app.
AS_INSTALLED = "facet-probe"


def help_of(script: str) -> str:
    """`<script> --help`: the installed script's file for AS_INSTALLED, else its entry point in this process."""
    path = SCRIPTS / script
    assert path.exists(), f"{path} missing: run `pip install -e . --no-deps` to install the console scripts"
    if script == AS_INSTALLED:  # a real process: the installed console script as a shell runs it
        proc = subprocess.run([str(path), "--help"], capture_output=True, text=True, timeout=120)
    else:
        proc = run_argv([script, "--help"])
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def groups_listed(text: str) -> set[str]:
    """The config groups the help lists (the lines before its config/settings section that name a group)."""
    head = re.split(r"^== (?:Config ==|Settings)", text, flags=re.M)[0]
    return set(re.findall(r"^([a-z_]+(?:@[\w.]+)?) \(now [^)]*\): ", head, flags=re.M))


@pytest.mark.slow
@pytest.mark.parametrize(("script", "groups", "says"), [
    ("facet-probe", {"callbacks", "dataset", "experiment", "facet", "judge", "model"}, "order-sensitivity audit"),
    ("facet-probe-odi", {"callbacks", "odi"}, "order-decomposition model"),
])
def test_help_describes_the_app_and_lists_only_its_groups(script, groups, says):
    text = help_of(script)
    assert text.startswith(f"{script} (python -m ") and says in text.split("\n\n")[0]
    assert groups_listed(text) == groups
    assert f"{script} -sc install=bash" in text  # tab completion, as docs/api.md says


def test_an_app_without_groups_says_so():
    text = help_of("facet-probe-explore")
    assert groups_listed(text) == set() and "takes settings only" in text
