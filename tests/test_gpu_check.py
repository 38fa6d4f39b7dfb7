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
def test_the_cpu_part_builds_audits_compares_quantises_places_and_says_what_it_skipped(tmp_path, capsys):
    assert not torch.cuda.is_available()  # CI's machines: the CPU part is what this test pins down
    out = tmp_path / "gpu_check.md"
    code = gpu_check.main(["--families", "llava", "--trials", "8", "--out", str(out), "--work", str(tmp_path / "w")])
    printed = capsys.readouterr().out
    rows = _rows(printed)
    assert code == 0, printed
    assert out.read_text().strip() == printed.strip()  # --out writes the table it printed
    assert "no GPU" in printed.splitlines()[0]  # the header names the machine
    assert rows["tiny copy"][0] == "ok" and "chat_template" in rows["tiny copy"][1]  # built on the spot, hub layout
    result, detail = rows["audit with images (cpu)"]
    assert result == "ok" and "0 errors" in detail and "1 image(s) each" in detail  # in-process audit, images seen
    result, detail = rows["batched vs serial, bf16"]
    assert result == "ok" and "/ 8 answers differ (tolerance 1, 12.5%)" in detail
    assert rows["throughput"][0] == "ok" and "trials/s" in rows["throughput"][1]
    assert rows["NF4 (bitsandbytes)"][0] == "ok"  # bitsandbytes runs on CPU (../shared/README.md)
    for placed in ("placement, simulated (bf16)", "placement, simulated (NF4)"):
        assert rows[placed][0] == "ok" and "sharded over GPUs [0, 1]" in rows[placed][1]
    assert rows["placement, visible GPUs"] == ("skipped", "no CUDA: the decision on real GPUs needs one "
                                                           "(simulated rows above)")
    assert rows["FlashAttention-2"] == ("skipped", "no CUDA")
    assert rows["vLLM engine (fallback refuse)"][0] == "skipped"
    assert "| kimi_vl_a3b | all | skipped |" in printed  # every panel family has a row, with why


def test_a_check_that_raises_is_a_fail_row_and_the_run_goes_on():
    def broken() -> str:
        raise RuntimeError("first forward failed\ntraceback lines")

    row = gpu_check.checked("llava", "FlashAttention-2", broken)
    assert (row.result, row.detail) == ("FAIL", "RuntimeError: first forward failed")

    def not_here() -> str:
        raise gpu_check.Skip("no CUDA")

    skipped = gpu_check.checked("llava", "vLLM", not_here)
    assert (skipped.result, skipped.detail) == ("skipped", "no CUDA")
