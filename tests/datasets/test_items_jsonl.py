"""dataset=items_jsonl reads canonical items (a run's items.jsonl) and FACET-PROBE v0.0.1 item lines, and
every malformed line fails with the file, the line and the field."""

from __future__ import annotations

import base64
import json
import shutil
from pathlib import Path

import pytest

from facet_probe.core.items import AnswerType, ComponentKind, ItemError
from facet_probe.datasets.base import DatasetUnavailable
from facet_probe.datasets.items_jsonl import ItemsJsonl, LineError
from facet_probe.datasets.synthetic import SyntheticEvidence, SyntheticImageSet, SyntheticVisualMCQ


def write_lines(path: Path, rows: list) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


def load(path: Path, **options):
    return ItemsJsonl(name="items_jsonl", path=str(path), **options).load()


@pytest.fixture
def synthetic_items():
    return [*SyntheticVisualMCQ(name="synthetic_visual_mcq", n=3).load(),
            *SyntheticEvidence(name="synthetic_evidence", n=3).load(),
            *SyntheticImageSet(name="synthetic_image_set", n=3).load()]


def test_canonical_items_round_trip_with_inline_images(tmp_path, synthetic_items):
    path = write_lines(tmp_path / "items.jsonl", [i.model_dump_json() for i in synthetic_items])
    loaded = ItemsJsonl(name="items_jsonl", path=str(path)).load_all()
    assert loaded == synthetic_items


def test_model_dump_json_mode_lines_load_too(tmp_path, synthetic_items):
    path = write_lines(tmp_path / "items.jsonl", [i.model_dump(mode="json") for i in synthetic_items])
    assert sorted(load(path), key=lambda i: i.item_id) == sorted(synthetic_items, key=lambda i: i.item_id)


def test_image_paths_are_relative_to_the_file_and_data_b64_is_accepted(tmp_path, synthetic_items):
    item = synthetic_items[0]
    png = item.fixed[0].image.read_bytes()
    (tmp_path / "img").mkdir()
    (tmp_path / "img" / "pic.png").write_bytes(png)
    by_path = item.model_dump(mode="json")
    by_path["fixed"][0]["image"] = {"path": "img/pic.png"}
    by_b64 = item.model_dump(mode="json")
    by_b64["item_id"] = item.item_id + "-b64"
    by_b64["fixed"][0]["image"] = {"data_b64": base64.b64encode(png).decode(), "sha256": item.fixed[0].image.sha256}
    moved = tmp_path / "elsewhere"
    moved.mkdir()
    write_lines(tmp_path / "items.jsonl", [by_path, by_b64])
    shutil.copy(tmp_path / "items.jsonl", moved / "items.jsonl")
    a, b = sorted(load(tmp_path / "items.jsonl"), key=lambda i: i.item_id)
    assert a.fixed[0].image.read_bytes() == png == b.fixed[0].image.read_bytes()
    assert a.fixed[0].image.sha256 == item.fixed[0].image.sha256
    with pytest.raises(LineError, match=r"items.jsonl:1: fixed\[0\]\.image\.path: file not found"):
        load(moved / "items.jsonl")


def test_sample_is_seeded_and_prefix_stable(tmp_path, synthetic_items):
    path = write_lines(tmp_path / "items.jsonl", [i.model_dump_json() for i in synthetic_items])
    everything = ItemsJsonl(name="items_jsonl", path=str(path)).load()
    assert sorted(i.item_id for i in everything) == sorted(i.item_id for i in synthetic_items)
    assert ItemsJsonl(name="items_jsonl", path=str(path), n=4).load() == everything[:4]
    assert ItemsJsonl(name="items_jsonl", path=str(path), n=4, seed=1).load() != everything[:4]


def test_every_facet_is_allowed_since_each_checks_its_items(tmp_path):
    """Every registered facet, and a plug-in facet no list names, may order a JSONL file's items."""
    from facet_probe.audit.plan import Cell, pairs
    from facet_probe.facets import FACETS

    loader = ItemsJsonl(name="items_jsonl", path=str(tmp_path / "items.jsonl"))
    assert all(pairs(loader, Cell(name, cls(), "items_jsonl")) for name, cls in FACETS.items())
    assert pairs(loader, Cell("a_plug_in_facet", FACETS["option_order"](), "items_jsonl"))


# --- FACET-PROBE v0.0.1 item lines ----------------------------------------------------------------

FP_TOY = {"item_id": "toy::1", "dataset": "toy", "question_ref": "toy-question-1",
          "components": [{"component_id": "choice-a", "kind": "choice", "content_ref": "toy-choice-a", "label": "A"},
                         {"component_id": "choice-b", "kind": "choice", "content_ref": "toy-choice-b", "label": "B"},
                         {"component_id": "choice-c", "kind": "choice", "content_ref": "toy-choice-c", "label": "C"}],
          "choices": ["A", "B", "C"], "gold": "choice-a"}


def test_v001_mcq_line_with_an_inline_question(tmp_path):
    path = write_lines(tmp_path / "fp.jsonl", [{**FP_TOY, "question": "Which letter comes first?"}])
    (item,) = load(path)
    assert item.item_id == "toy::1" and item.dataset == "toy"
    assert item.answer_type == AnswerType.MCQ and item.choices == ("A", "B", "C") and item.gold_index == 0
    assert item.components == ()  # choices are the item's choices, not components
    assert item.metadata["source_format"] == "facet-probe-0.0.1"


@pytest.mark.parametrize(("gold", "index"), [("choice-b", 1), ("blue", 2), ("c", 2)])
def test_v001_gold_may_be_a_component_id_a_choice_or_a_letter(tmp_path, gold, index):
    row = {**FP_TOY, "question": "q?", "choices": ["red", "green", "blue"], "gold": gold}
    (item,) = load(write_lines(tmp_path / "fp.jsonl", [row]))
    assert item.gold_index == index


def test_v001_opaque_references_fail_unless_used_verbatim(tmp_path):
    path = write_lines(tmp_path / "fp.jsonl", [FP_TOY])
    with pytest.raises(LineError, match=r"fp.jsonl:1: question_ref: 'toy-question-1' is a reference .*refs_as_text"):
        load(path)
    (item,) = load(path, refs_as_text=True)
    assert item.question == "toy-question-1"


def test_v001_evidence_line_with_text_refs_files_and_images(tmp_path):
    png = SyntheticImageSet(name="synthetic_image_set", n=1).load()[0].components[0].image.read_bytes()
    (tmp_path / "fig.png").write_bytes(png)
    (tmp_path / "chunk2.txt").write_text("Ben lives in Rome.\n")
    row = {"item_id": "e7", "dataset": "hotpotqa", "question": "Where does Ana live?", "gold": "Oslo",
           "components": [
               {"component_id": "evidence_0", "kind": "text", "content_ref": "text:Ana lives in Oslo.",
                "label": "Evidence 1", "source": "wiki"},
               {"component_id": "evidence_1", "kind": "text", "content_ref": "chunk2.txt", "label": "Evidence 2"},
               {"component_id": "doc", "kind": "document", "title": "Ana", "text": "Ana is a pilot."},
               {"component_id": "img", "kind": "image", "content_ref": "fig.png"}]}
    (item,) = load(write_lines(tmp_path / "fp.jsonl", [row]))
    assert item.item_id == "hotpotqa::e7"
    assert item.answer_type == AnswerType.FREE and item.gold == "Oslo"
    assert [c.kind for c in item.components] == [ComponentKind.TEXT_CHUNK, ComponentKind.TEXT_CHUNK,
                                                 ComponentKind.DOCUMENT, ComponentKind.IMAGE]
    assert [c.text for c in item.components[:3]] == ["Ana lives in Oslo.", "Ben lives in Rome.", "Ana is a pilot."]
    assert item.components[2].title == "Ana"
    assert item.components[0].metadata["source"] == "wiki"
    assert item.components[0].metadata["fp_label"] == "Evidence 1"  # kept as data, never rendered
    assert item.components[3].image.read_bytes() == png


# --- errors name the file, the line and the field ----------------------------------------------------

def test_missing_file_and_missing_path_say_what_to_do(tmp_path):
    with pytest.raises(DatasetUnavailable, match="items file not found"):
        load(tmp_path / "nope.jsonl")
    with pytest.raises(ValueError, match="dataset.path="):
        ItemsJsonl(name="items_jsonl")


@pytest.mark.parametrize(("line", "message"), [
    ("{not json", r"bad.jsonl:2: not valid JSON"),
    ("[1, 2]", r"bad.jsonl:2: expected a JSON object"),
    (json.dumps({"item_id": "x::1", "dataset": "x", "question": "q", "choices": ["a", "b"], "gold_index": 5,
                 "answer_type": "mcq"}), r"bad.jsonl:2: invalid item x::1: .*gold_index 5 is not among the 2 choices"),
    (json.dumps({"dataset": "x", "question": "q?", "components": [], "gold_index": 0, "answer_type": "mcq"}),
     r"bad.jsonl:2: invalid item <no item_id>: item_id: Field required"),
    (json.dumps({**FP_TOY, "question": "q?", "gold": "zzz"}), r"bad.jsonl:2: gold: 'zzz' is neither"),
    (json.dumps({"item_id": "m", "question": "q?", "gold": "x",
                 "components": [{"component_id": "a", "kind": "mixed", "content_ref": "text:x"}]}),
     r"bad.jsonl:2: components\[0\]\.kind: 'mixed' has no canonical counterpart"),
    (json.dumps({"item_id": "m", "question": "q?", "components": [{"component_id": "a", "kind": "text",
                                                                    "content_ref": "text:x"}]}),
     r"bad.jsonl:2: gold: an item without choices needs `gold`"),
])
def test_bad_lines_name_file_line_and_field(tmp_path, line, message):
    good = {**FP_TOY, "item_id": "toy::0", "question": "ok?"}
    path = write_lines(tmp_path / "bad.jsonl", [good, line])
    with pytest.raises(ItemError, match=message):
        load(path)


def test_tampered_image_bytes_fail_the_digest_check(tmp_path, synthetic_items):
    row = synthetic_items[0].model_dump(mode="json")
    row["fixed"][0]["image"]["sha256"] = "0" * 64
    with pytest.raises(LineError, match=r"items.jsonl:1: fixed\[0\]\.image: sha256 0+ does not match"):
        load(write_lines(tmp_path / "items.jsonl", [row]))


def test_duplicate_item_ids_name_both_lines(tmp_path, synthetic_items):
    line = synthetic_items[1].model_dump_json()
    with pytest.raises(LineError, match=r"items.jsonl:3: item_id .* repeats line 1"):
        load(write_lines(tmp_path / "items.jsonl", [line, "", line]))


def mcq_line(i: int, **changes) -> dict:
    return {"item_id": f"mine::q{i}", "dataset": "mine", "question": f"Which is {i}?",
            "choices": [f"{i}", f"{i + 1}", f"{i + 2}"], "gold_index": 0, **changes}


def test_a_line_that_is_not_utf8_names_its_line_and_byte_offset(tmp_path):
    """The file was read as text: a Latin-1 byte ended in a UnicodeDecodeError traceback."""
    first = (json.dumps(mcq_line(1)) + "\n").encode()
    second = json.dumps(mcq_line(2, question="Caf\u00e9?"), ensure_ascii=False).encode("latin-1")
    path = tmp_path / "items.jsonl"
    path.write_bytes(first + second + b"\n")
    bad = len(first) + second.index(b"\xe9")
    with pytest.raises(LineError, match=rf"items.jsonl:2: not valid UTF-8 \(byte 0xe9 at byte offset {bad} of the "
                                        r"file\); save the file as UTF-8"):
        load(path)


def test_a_file_saved_with_a_utf8_byte_order_mark_is_read(tmp_path):
    """Notepad and Excel start UTF-8 files with a byte-order mark: valid UTF-8, once refused as 'not valid JSON'."""
    path = tmp_path / "items.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + "".join(json.dumps(mcq_line(i)) + "\n" for i in (1, 2)).encode())
    assert [i.item_id for i in load(path)] == ["mine::q1", "mine::q2"]


def test_a_referenced_text_file_that_is_not_utf8_is_named(tmp_path):
    (tmp_path / "q.txt").write_bytes(b"Caf\xe9?")
    row = {**FP_TOY, "question_ref": "q.txt"}
    with pytest.raises(LineError, match=r"fp.jsonl:1: question_ref: .*q.txt: not valid UTF-8 "
                                        r"\(byte 0xe9 at byte offset 3"):
        load(write_lines(tmp_path / "fp.jsonl", [row]))


@pytest.mark.parametrize("row", [mcq_line(2, choices=["same", "same", "other"]),
                                 {**FP_TOY, "question": "q?", "choices": ["same", "other", "same "], "gold": "other"}],
                         ids=["canonical", "v001"])
def test_an_item_repeating_an_option_is_refused_unless_kept_as_the_reference_does(tmp_path, row):
    """An option-order flip between two identical options means nothing: the item is named, not audited."""
    path = write_lines(tmp_path / "items.jsonl", [mcq_line(1), row])
    with pytest.raises(LineError, match=r"items.jsonl:2: item .* offers the option 'same' 2 times \(choices 0, \d[:)].*"
                                        r"dataset.duplicate_choices=keep"):  # 'same ' is shown beside 'same'
        load(path)
    kept = load(path, duplicate_choices="keep")  # FACET-PROBE v0.0.1: each copy its own option
    assert sorted(len(i.choices) for i in kept) == [3, 3]
    with pytest.raises(ValueError, match="duplicate_choices='drop'; valid: refuse, keep"):
        load(path, duplicate_choices="drop")


def test_a_boolean_gold_index_is_refused_naming_the_line(tmp_path):
    with pytest.raises(LineError, match=r"items.jsonl:1: invalid item mine::q1: gold_index: .*got true \(a boolean\)"):
        load(write_lines(tmp_path / "items.jsonl", [mcq_line(1, gold_index=True)]))


def test_a_misspelt_field_is_named_not_dropped(tmp_path):
    """`answer_alias` (for `answer_aliases`) was dropped without a word, and the item audited without its aliases."""
    row = {"item_id": "mine::q1", "dataset": "mine", "question": "Capital of France?", "answer_type": "free",
           "gold_answer": "Paris", "answer_alias": ["paris city"]}
    path = write_lines(tmp_path / "items.jsonl", [row])
    with pytest.raises(LineError, match=r"items.jsonl:1: unknown field 'answer_alias' \(did you mean "
                                        r"'answer_aliases'\?\): .*keep your own keys under metadata"):
        load(path)
    del row["answer_alias"]
    assert load(write_lines(tmp_path / "ok.jsonl", [{**row, "metadata": {"source": "me"}}]))[0].gold_answer == "Paris"
