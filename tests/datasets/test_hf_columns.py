"""dataset=hf: a dataset in its own column names (local parquet, JSON lines, CSV) becomes items by the column
mapping; what a facet needs is checked against the mapping before any data is read, one line naming the key."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from omegaconf import OmegaConf

from facet_probe.core.errors import ConfigError
from facet_probe.core.extras import MissingExtra
from facet_probe.core.items import AnswerType, ComponentKind
from facet_probe.datasets.base import DatasetUnavailable
from facet_probe.datasets.hf_columns import AnswerForm, ColumnMap, HFColumns, gold_index
from facet_probe.datasets.split_table import in_split
from facet_probe.facets.document_rank_order import DocumentRankOrder
from facet_probe.facets.evidence_chunk_order import EvidenceChunkOrder
from facet_probe.facets.example_images import square_png
from facet_probe.facets.image_set_order import ImageSetOrder
from facet_probe.facets.option_order import OptionOrder
from facet_probe.facets.tool_description_order import ToolDescriptionOrder

#: ARC in its upstream schema (choices: a struct of text and label lists; answerKey: one of the labels).
ARC_ROWS = [
    {"id": "Mercury_1", "question": "Which is a gas?",
     "choices": {"text": ["rock", "steam", "ice", "wood"], "label": ["A", "B", "C", "D"]}, "answerKey": "B"},
    {"id": "Mercury_2", "question": "Which is warm?",
     "choices": {"text": ["sun", "snow", "ice"], "label": ["1", "2", "3"]}, "answerKey": "1"},
]


def write_parquet(path, rows):
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows), path)
    return path


def loader(path, **columns) -> HFColumns:
    options = {k: columns.pop(k) for k in ("answer_form", "split", "subset", "n") if k in columns}
    return HFColumns(path=str(path), columns=columns, **options)


def test_a_hub_layout_folder_in_upstream_columns_maps_struct_paths_and_labels(tmp_path):
    write_parquet(tmp_path / "ARC-Easy" / "test-00000-of-00001.parquet", ARC_ROWS)
    write_parquet(tmp_path / "ARC-Easy" / "train-00000-of-00001.parquet", ARC_ROWS[:1])
    items = loader(tmp_path, subset="ARC-Easy", choices="choices.text", labels="choices.label",
                   answer="answerKey", id="id").load_all()
    assert [(i.item_id, i.choices, i.gold_index) for i in items] == [
        ("hf::Mercury_1", ("rock", "steam", "ice", "wood"), 1), ("hf::Mercury_2", ("sun", "snow", "ice"), 0)]


def test_a_csv_with_a_column_per_option_and_row_index_ids(tmp_path):
    (tmp_path / "exam.csv").write_text("stem,A,B,C,gold\nWhich is red?,sky,blood,grass,1\nWhich is 2?,1,2,3,1\n")
    items = loader(tmp_path / "exam.csv", question="stem", choices=["A", "B", "C"], answer="gold",
                   answer_form="index").load_all()
    assert [(i.item_id, i.choices, i.gold_index) for i in items] == [
        ("hf::0", ("sky", "blood", "grass"), 1), ("hf::1", ("1", "2", "3"), 1)]


def test_json_lines_evidence_documents_and_free_answers(tmp_path):
    rows = [{"q": "Where does Ann live?", "a": "Oslo", "alias": ["oslo city"],
             "passages": ["Ann moved to Oslo.", "Bob lives in Rome."],
             "docs": [{"title": "Ann", "text": "Ann moved to Oslo."}, {"title": "Bob", "text": "Bob lives in Rome."}],
             "background": "Two friends."}]
    (tmp_path / "test.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    (item,) = loader(tmp_path, question="q", answer="a", aliases="alias", chunks="passages", documents="docs",
                     context="background").load_all()
    assert item.answer_type == AnswerType.FREE and item.gold_answer == "Oslo" and item.answer_aliases == ("oslo city",)
    assert [(c.kind, c.title) for c in item.components] == [
        (ComponentKind.TEXT_CHUNK, None), (ComponentKind.TEXT_CHUNK, None),
        (ComponentKind.DOCUMENT, "Ann"), (ComponentKind.DOCUMENT, "Bob")]
    assert [c.text for c in item.fixed] == ["Two friends."]
    assert EvidenceChunkOrder().unsupported_reason(item) is None
    assert DocumentRankOrder().unsupported_reason(item) is None


def test_images_as_the_hub_stores_them_or_as_paths_relative_to_the_data(tmp_path):
    red, blue = square_png("red").read_bytes(), square_png("blue").read_bytes()
    (tmp_path / "blue.png").write_bytes(blue)
    write_parquet(tmp_path / "data" / "test-00000-of-00001.parquet", [
        {"question": "How many are red?", "pics": [{"bytes": red, "path": None}, {"bytes": None, "path": "blue.png"}],
         "options": ["0", "1", "2"], "answer": 1}])
    (item,) = loader(tmp_path, images="pics", choices="options", answer="answer").load_all()
    assert [c.image.read_bytes() for c in item.components] == [red, blue]
    assert ImageSetOrder().unsupported_reason(item) is None


def test_rows_that_cannot_be_items_are_skipped_and_counted(tmp_path):
    rows = [{"q": "Fine?", "o": ["yes", "no"], "a": "no"},
            {"q": " ", "o": ["yes", "no"], "a": "no"},
            {"q": "Gold?", "o": ["yes", "no"], "a": "maybe"},
            {"q": "Twice?", "o": ["yes", "yes "], "a": "A"}]
    hf = loader(write_parquet(tmp_path / "t.parquet", rows), question="q", choices="o", answer="a")
    (item,) = hf.load_all()
    assert item.gold_index == 1
    assert sum(hf.skipped.values()) == 3
    assert set(hf.skipped) == {"the question is empty", NO_OPTION,
                               "two choices have the same text (a flip between them means nothing)"}


NO_OPTION = "the answer names no option (read as index or text or letter; dataset.answer_form)"


@pytest.mark.parametrize("answer, form, expected", [
    (2, AnswerForm.AUTO, 2), ("C", AnswerForm.AUTO, 2), ("ice", AnswerForm.AUTO, 2), ("(c)", AnswerForm.LETTER, 2),
    ("2", AnswerForm.INDEX, 2), ("2", AnswerForm.AUTO, NO_OPTION), (True, AnswerForm.INDEX,
                                                                     "the answer names no option (read as index; "
                                                                     "dataset.answer_form)")])
def test_the_answer_forms(answer, form, expected):
    assert gold_index(answer, ["rock", "steam", "ice"], None, form) == expected


def test_an_answer_that_reads_two_ways_is_not_guessed():
    assert gold_index("B", ["C", "x", "B"], None, AnswerForm.AUTO) == (
        "the answer 'B' reads as text and as letter with different options; set dataset.answer_form")
    assert gold_index("B", ["C", "x", "B"], None, AnswerForm.TEXT) == 2


@pytest.mark.parametrize("facet, key", [(OptionOrder(), "choices"), (EvidenceChunkOrder(), "chunks"),
                                        (DocumentRankOrder(), "documents"), (ImageSetOrder(), "images")])
def test_a_facet_whose_components_no_column_gives_names_the_key_to_map(tmp_path, facet, key):
    hf = HFColumns(path=str(tmp_path), columns={"answer": "a"})  # nothing read: the mapping alone decides
    assert f"dataset.columns.{key}=<column>" in hf.facet_problem(facet.name, facet.kinds)
    mapped = HFColumns(path=str(tmp_path), columns={key: "x", "answer": "a"})
    assert mapped.facet_problem(facet.name, facet.kinds) is None


def test_a_facet_of_kinds_no_column_can_give_points_to_items_jsonl(tmp_path):
    hf = HFColumns(path=str(tmp_path), columns={"answer": "a", "chunks": "c"})
    assert "dataset=items_jsonl" in hf.facet_problem("tool_description_order", ToolDescriptionOrder.kinds)


def test_a_mapped_column_the_data_lacks_is_one_line_listing_its_columns(tmp_path):
    path = write_parquet(tmp_path / "t.parquet", [{"prompt": "Q?", "opts": ["a", "b"], "gold": 0}])
    with pytest.raises(ConfigError, match=r"dataset.columns.question=question: no such column .* its columns: "
                                          r"prompt, opts, gold"):
        loader(path, choices="opts", answer="gold").load_all()
    with pytest.raises(ConfigError, match="unknown column key.*questoin"):
        loader(path, questoin="prompt", answer="gold")


@pytest.mark.parametrize("columns", [["question", "answer"], "question", OmegaConf.create(["question"])])
def test_columns_that_are_not_a_mapping_are_one_line(columns):
    """A list or a string where the key -> column mapping belongs is refused with one line, not a crash."""
    with pytest.raises(ConfigError, match=r"dataset hf: dataset.columns must map keys to columns"):
        ColumnMap.from_config(columns, "hf")


def test_a_hub_id_without_the_datasets_library_names_the_extra(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setitem(sys.modules, "datasets", None)
    with pytest.raises(MissingExtra, match=r"pip install 'facet_probe\[datasets\]'"):
        loader("someone/quiz", answer="a").load_all()


def test_a_hub_id_not_in_the_datasets_cache_offline_is_one_line(monkeypatch, tmp_path):
    pytest.importorskip("datasets")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    with pytest.raises(DatasetUnavailable, match=r"^dataset.path=someone/quiz: .*could not be read .*give a local "
                                                 r"copy: dataset.path=<folder or file>$"):
        loader("someone/quiz", answer="a").load_all()


@pytest.mark.parametrize("rel, split, found", [
    ("data/test-00000-of-00001.parquet", "test", True), ("test.jsonl", "test", True), ("test/part.csv", "test", True),
    ("data/train-00000-of-00001.parquet", "test", False), ("contest.jsonl", "test", False),
    ("data/testmini-00000.parquet", "test", False)])
def test_a_folders_split_files_by_the_hubs_naming(rel, split, found):
    assert in_split(Path(rel), split) is found
