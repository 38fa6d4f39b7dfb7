"""`make gpu-check`'s CPU part (facet_probe_dev/gpu_check.py): what CI can run of the check a GPU day runs in full."""

from __future__ import annotations

import pytest
import torch

from facet_probe_dev import gpu_check


def _rows(text: str) -> dict[str, tuple[str, str]]:
    """check -> (result, detail) of the printed table's llava rows."""
    out = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 5 and cells[0].startswith("llava"):
            out[cells[1]] = (cells[2], cells[3])
    return out


@pytest.mark.slow
def test_the_quick_cpu_part_builds_audits_compares_quantises_and_says_what_it_skipped(tmp_path, capsys):
    assert not torch.cuda.is_available()  # CI's machines: the CPU part is what this test pins down
    out = tmp_path / "gpu_check"
    code = gpu_check.main(["--quick", "--families", "llava", "--trials", "4", "--out", str(out),
                           "--work", str(tmp_path / "w")])
    printed = capsys.readouterr().out
    rows = _rows(printed)
    assert code == 0, printed
    assert (out / "gpu_check.md").read_text().strip() == printed.strip()  # --out: the table, in the folder given
    header = printed.splitlines()[0]
    assert header.startswith("gpu-check --quick ") and "no GPU" in header and "transformers " in header
    assert rows["tiny copy"][0] == "ok" and "chat_template" in rows["tiny copy"][1]  # built on the spot, hub layout
    result, detail = rows["audit with images, bf16 (cpu)"]
    assert result == "ok" and "0 errors" in detail and "1 image(s) each" in detail and "bfloat16" in detail
    result, detail = rows["batched vs serial, bf16"]
    assert result == "ok" and "/ 4 answers differ" in detail and "batch 1 vs 8" in detail
    assert rows["throughput"][0] == "ok" and "trials/s" in rows["throughput"][1]
    assert rows["NF4 (bitsandbytes)"][0] == "ok"  # bitsandbytes runs on CPU (../shared/README.md)
    assert "placement, simulated (bf16)" not in rows  # --quick leaves the simulated placements to CI's other tests
    assert rows["placement, visible GPUs"] == ("skipped", "no CUDA: the decision on real GPUs needs one")
    assert rows["FlashAttention-2"] == ("skipped", "no CUDA")
    assert rows["vLLM engine (fallback refuse)"][0] == "skipped"
    assert "| kimi_vl_a3b | all | skipped |" in printed  # every panel family has a row, with why


def test_checks_not_started_within_the_budget_are_skipped_and_a_missing_package_is_a_skipped_row(tmp_path):
    env = gpu_check.Env(cuda=False, flash_attn=False, vllm=None, bitsandbytes=False)
    spent = gpu_check.Session(env, 4, tmp_path, quick=True, deadline=0.0)
    row = spent.checked("llava", "NF4 (bitsandbytes)", lambda: "never run")
    assert (row.result, row.detail) == ("skipped", "the time budget (--budget) ran out before this check")

    def without_pandas() -> str:
        raise ModuleNotFoundError("No module named 'pandas'", name="pandas")

    row = gpu_check.checked("llava", "audit with images, bf16 (cpu)", without_pandas)
    assert (row.result, row.detail) == ("skipped", "pandas is not installed here (python -m facet_probe_dev.gpu_wheels)")


def test_a_transformers_outside_the_supported_range_is_said_in_the_header():
    assert gpu_check.supported_note("transformers", "4.57.0").startswith(" (outside the supported ")
    assert gpu_check.supported_note("transformers", "5.25.0") == ""


def test_a_check_that_raises_is_a_fail_row_and_the_run_goes_on():
    def broken() -> str:
        raise RuntimeError("first forward failed\ntraceback lines")

    row = gpu_check.checked("llava", "FlashAttention-2", broken)
    assert (row.result, row.detail) == ("FAIL", "RuntimeError: first forward failed")

    def not_here() -> str:
        raise gpu_check.Skip("no CUDA")

    skipped = gpu_check.checked("llava", "vLLM", not_here)
    assert (skipped.result, skipped.detail) == ("skipped", "no CUDA")
