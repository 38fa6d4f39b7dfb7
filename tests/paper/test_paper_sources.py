"""Every table and figure the paper app writes names what it was built from (`sources.json` in its out folder)."""

from __future__ import annotations

import json

import pytest

from facet_probe import api


@pytest.mark.slow  # 1.5 s or more: left out of `make test-fast`
def test_each_file_names_its_target_inputs_and_run_folders(tmp_path):
    run = tmp_path / "runs" / "oracle"
    api.audit([f"hydra.run.dir={run}", "model=oracle", "facet=option_order", "dataset=synthetic_mcq", "limit=3",
               "progress=false"])
    out = tmp_path / "paper"
    api.paper([f"input={tmp_path / 'runs'}", f"out={out}", "target=table1", "bootstrap=20"])
    api.paper([f"out={out}", "target=verify"])  # a second build into the same folder keeps the first's entries
    sources = json.loads((out / "sources.json").read_text())
    written = {p.name for p in out.iterdir() if p.suffix in (".csv", ".tex", ".png", ".pdf")}
    assert written == set(sources)
    assert sources["table1.csv"]["target"] == "table1" and sources["table1.tex"]["inputs"] == [str(tmp_path / "runs")]
    assert sources["table1.csv"]["run_folders"] == [str(run)]
    assert sources["verify.csv"]["inputs"][0].startswith("published data") and sources["verify.csv"]["run_folders"] == []
