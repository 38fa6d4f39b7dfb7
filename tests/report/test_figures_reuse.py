"""A report figure records what it was drawn from; drawing it again from the same numbers, code and matplotlib
keeps the PNG (a resumed run's report redraws nothing), and any change draws it anew."""

from __future__ import annotations

from pathlib import Path

from PIL import Image

from facet_probe.report import figure_process
from facet_probe.report.figure_process import (
    INPUTS_KEY,
    ReportFigures,
    drawn_from,
    is_current,
)
from tests.report.test_figures import ordering, summary


def _figures() -> ReportFigures:
    return ReportFigures(summary=summary(("a", "b")), ordering=ordering())


def _stamps(folder: Path) -> dict[str, int]:
    return {p.name: p.stat().st_mtime_ns for p in sorted(folder.glob("*.png"))}


def test_the_same_numbers_keep_every_png_and_a_changed_summary_redraws_only_its_figures(tmp_path):
    first = _figures().draw(tmp_path)
    assert [p.name for p in first] == list(ReportFigures.NAMES)
    before = _stamps(tmp_path)
    assert _figures().draw(tmp_path) == first  # nothing drawn, every path still returned
    assert _stamps(tmp_path) == before
    changed = summary(("a", "b"))
    changed.loc[0, "flip_rate"] += 0.01
    ReportFigures(summary=changed, ordering=ordering()).draw(tmp_path)
    after = _stamps(tmp_path)
    assert after["accuracy_per_ordering.png"] == before["accuracy_per_ordering.png"]
    assert all(after[n] != before[n] for n in ("flip_rate_per_cell.png", "accuracy_vs_flip.png"))


def test_the_png_says_what_it_was_drawn_from_and_other_code_or_a_damaged_file_is_drawn_again(tmp_path, monkeypatch):
    figures = _figures()
    figures.draw(tmp_path)
    png = tmp_path / "accuracy_per_ordering.png"
    key = drawn_from(png.name, figures.ordering)
    with Image.open(png) as image:
        assert image.info[INPUTS_KEY] == key
    assert is_current(png, key)
    # other drawing code (or another matplotlib): another key, so the PNG is not current
    monkeypatch.setattr(figure_process, "_drawing_code", lambda: b"figures.py of another release")
    assert not is_current(png, drawn_from(png.name, figures.ordering))
    monkeypatch.undo()
    png.write_bytes(png.read_bytes()[:40])  # a torn file (not one of ours: ours are written atomically)
    assert not is_current(png, key)
    figures.draw(tmp_path)
    assert is_current(png, key)


def test_a_frame_pandas_cannot_hash_is_always_drawn(tmp_path):
    frame = summary().assign(note=[["a"], ["b"], ["c"]])
    assert drawn_from("flip_rate_per_cell.png", frame) is None
    assert not is_current(tmp_path / "flip_rate_per_cell.png", None)


def test_figures_already_current_are_not_drawn(tmp_path, monkeypatch):
    """Not drawn, so matplotlib is not even imported (`_draw` imports it)."""
    _figures().draw(tmp_path)

    def must_not_draw(*args):
        raise AssertionError("a current figure was drawn again")

    monkeypatch.setattr(figure_process, "_draw", must_not_draw)
    assert len(_figures().draw(tmp_path)) == 3
