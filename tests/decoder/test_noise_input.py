"""What the decoder app reads (issue 60, points 4 and 5), on hand-built trials files in FACET-PROBE's layout
(no trial_key, call_key or prompt_hash; a `temperature` column), through `python -m facet_probe.decoder` in this
process: every answer is decomposed, whatever repeats a permutation or shares the file with other temperatures."""

from __future__ import annotations

from itertools import combinations
from pathlib import Path

import pandas as pd
import pytest

from facet_probe.decoder.noise import trial_temperatures
from facet_probe.scoring.run_trials import MixedRunError, read_runs
from facet_probe_dev.testing.in_process import run_module
from tests.decoder.test_noise import repeated_ordering

ROOT = Path(__file__).resolve().parents[2]
#: K=4 orderings of a 2-option item (n! = 2 < K): orderings 2 and 3 show the permutations of 0 and 1 again.
PERMUTATIONS = [[0, 1], [1, 0], [0, 1], [1, 0]]


def grid_rows(answers: dict[str, list[list[str]]], temperature: float | None, prompt_hash: bool = False) -> list[dict]:
    """FACET-PROBE grid records: answers[item][ordering][repeat] (gold "A")."""
    rows = []
    for item, per_ordering in answers.items():
        for o, given in enumerate(per_ordering):
            for r, a in enumerate(given):
                perm = PERMUTATIONS[o]
                rows.append(dict(model="m", facet="option_order", dataset="d1", item_id=item, ordering_idx=o,
                                 repeat_idx=r, permutation=perm, answer_normalized=a, gold_normalized="A",
                                 correct=a == "A", temperature=temperature,
                                 **({"prompt_hash": f"{item}-{perm}"} if prompt_hash else {})))
    return rows


def write(rows: list[dict], path: Path) -> Path:
    pd.DataFrame(rows).to_json(path, orient="records", lines=True)
    return path


def decompose(path: Path, out: Path):
    done = run_module("facet_probe.decoder", f"input={path}", f"out={out}", "bootstrap=20", cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout, pd.read_csv(out / "decoder_decomposition.csv")


def reference_d(per_ordering: list[list[str]]) -> tuple[float, float]:
    """FACET-PROBE's grouping, written out: every answer belongs to its permutation; d_same is the share of pairs
    of one permutation's answers that differ, d_cross the share of pairs of two permutations' answers."""
    answers = [(tuple(PERMUTATIONS[o]), a) for o, given in enumerate(per_ordering) for a in given]
    same = [a != b for (p, a), (q, b) in combinations(answers, 2) if p == q]
    cross = [a != b for (p, a), (q, b) in combinations(answers, 2) if p != q]
    return sum(same) / len(same), sum(cross) / len(cross)


#: Ordering 2 repeats ordering 0's permutation with other answers: keeping one trial per (permutation, repeat)
#: reads 4 of an item's 8 answers.
REPEATED = {"I1": [["A", "A"], ["B", "B"], ["B", "B"], ["B", "A"]],
            "I2": [["A", "A"], ["A", "A"], ["B", "A"], ["A", "B"]]}


def test_a_repeated_permutation_keeps_the_answers_of_every_ordering_index(tmp_path):
    """Issue 60.4: without prompt_hash the answers at ordering indices 2 and 3 vanished (n_trials 8, not 16)."""
    stdout, pooled = decompose(write(grid_rows(REPEATED, 1.0), tmp_path / "grid.jsonl"), tmp_path / "out")
    row = pooled.iloc[0]
    assert row.n_trials == 16 and row.median_same_pairs == 2 * 6  # per item: 2 permutations of 4 answers each
    expected = [reference_d(REPEATED[i]) for i in ("I1", "I2")]
    assert row.d_same == pytest.approx(sum(s for s, _ in expected) / 2)
    assert row.d_cross == pytest.approx(sum(c for _, c in expected) / 2)
    assert row.delta == pytest.approx(sum(c - s for s, c in expected) / 2)
    assert "16 trials read" in stdout
    _, hashed = decompose(write(grid_rows(REPEATED, 1.0, prompt_hash=True), tmp_path / "hashed.jsonl"),
                          tmp_path / "hashed")
    pd.testing.assert_frame_equal(pooled, hashed)  # a prompt hash per permutation changes nothing


#: One grid file, three temperatures: the same rows (item, ordering, repeat) answered at each.
BY_TEMPERATURE = {
    0.0: {"I1": [["A", "A"], ["B", "B"], ["A", "A"], ["B", "B"]]},
    0.7: {"I1": [["A", "B"], ["B", "B"], ["A", "A"], ["B", "A"]]},
    1.0: {"I1": [["B", "A"], ["A", "B"], ["A", "B"], ["B", "A"]]},
}


def test_one_file_of_several_temperatures_is_decomposed_per_temperature(tmp_path):
    """Issue 60.5: it printed "8 trials of 1 run(s); 1 rows at temperature(s) 1", the other two dropped."""
    rows = [r for t, answers in BY_TEMPERATURE.items() for r in grid_rows(answers, t)]
    stdout, pooled = decompose(write(rows, tmp_path / "grid.jsonl"), tmp_path / "out")
    assert pooled["temperature"].tolist() == [0.0, 0.7, 1.0] and (pooled["n_trials"] == 8).all()
    for t, answers in BY_TEMPERATURE.items():
        d_same, d_cross = reference_d(answers["I1"])
        got = pooled[pooled["temperature"] == t].iloc[0]
        assert (got.d_same, got.d_cross) == pytest.approx((d_same, d_cross)), t
    assert f"{len(rows)} trials read from 1 input" in stdout
    assert "0: 8, 0.7: 8, 1: 8" in stdout and "temperature(s) 0, 0.7, 1" in stdout


def test_other_readers_refuse_a_file_of_several_temperatures_naming_the_column(tmp_path):
    """A report of such a file kept one temperature's trials without a word; now it is refused."""
    rows = [r for t, answers in BY_TEMPERATURE.items() for r in grid_rows(answers, t)]
    path = write(rows, tmp_path / "grid.jsonl")
    with pytest.raises(MixedRunError, match="temperature"):
        read_runs(path)
    assert len(read_runs(path, runs_apart=trial_temperatures).trials) == len(rows)


def test_a_temperature_column_fills_only_its_own_rows():
    """A grid file read beside our runs: our trials keep the temperature their responses record."""
    frame = pd.DataFrame({"temperature": [0.7, None], "provenance": [{}, {"generation": {"temperature": 1.0}}]})
    assert trial_temperatures(frame).tolist() == [0.7, 1.0]


def test_the_trials_of_a_shared_call_are_counted_once_and_said(tmp_path):
    """share_repeated_orderings: ordering 2 holds ordering 0's calls; read 6 trials, decomposed 4 calls."""
    path = write(repeated_ordering(shared=True).to_dict("records"), tmp_path / "shared.jsonl")
    stdout, pooled = decompose(path, tmp_path / "out")
    assert pooled["n_trials"].tolist() == [4]
    assert "6 trials read" in stdout and "1: 6 (2 repeat a shared call, counted once)" in stdout
