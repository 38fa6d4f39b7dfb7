"""Evidence-chunk and document-rank datasets: HotpotQA (two views), MuSiQue, MedXpertQA, MultiHop-RAG."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
import upstream_fixtures as fx
from hydra.utils import instantiate

from facet_probe.config.loading import load_option
from facet_probe.core.items import AnswerType, ComponentKind
from facet_probe.datasets import hotpotqa, medxpertqa, multihop_rag, musique

CONF = Path(__file__).resolve().parents[2] / "facet_probe" / "conf" / "dataset"
GOLD_FIRST = hotpotqa.Evidence.GOLD_FIRST


def by_raw_id(loader) -> dict:
    return {it.raw_id: it for it in loader.load_all()}


def ids(item) -> list[str]:
    return [c.id for c in item.components]


def test_hotpotqa_gold_first_keeps_the_supporting_paragraphs_and_the_first_distractors_in_upstream_order():
    row = fx.hotpot_row(4)
    assert hotpotqa.gold_kept(row, 6) == [0, 1, 2, 3, 4, 7]
    assert hotpotqa.gold_kept(row, 3) == [0, 2, 7]
    item = hotpotqa.row_to_item(row, "hotpotqa", ComponentKind.TEXT_CHUNK, hotpotqa.gold_kept(row, 6))
    assert ids(item) == ["p0", "p1", "p2", "p3", "p4", "p7"]
    supporting = {c.id: c.metadata["supporting"] for c in item.components}
    assert supporting == {"p0": False, "p1": False, "p2": True, "p3": False, "p4": False, "p7": True}
    p7 = item.components[-1]
    assert (
        p7.title == "Title 4-7"
        and p7.text == "Sentence 7.0 of 4.  Sentence 7.1."  # joined with " " as the reference (upstream sentences
        # after the first start with a space, so two between them: the reference's bytes)
        and p7.metadata["supporting_sentences"] == [0, 1]
    )
    assert item.answer_type == AnswerType.FREE and item.gold == "answer 4"
    assert item.metadata["gold_in_evidence"] and item.metadata["n_supporting_shown"] == 2


def test_hotpotqa_gold_first_needs_every_supporting_title_among_three_to_six_paragraphs():
    row = fx.hotpot_row(1)
    assert hotpotqa.gold_kept_eligible(row)
    short = {
        **row,
        "context": {"title": row["context"]["title"][:2], "sentences": row["context"]["sentences"][:2]},
    }
    assert not hotpotqa.gold_kept_eligible(short)
    assert not hotpotqa.HotpotQA().shows_enough(short)  # the reference needs three shown paragraphs as well


def test_hotpotqa_by_default_shows_the_first_six_context_paragraphs_gold_or_not(tmp_path, offline):
    """The paper's items are not filtered to gold evidence: the reference's evidence chunks are the first 6."""
    items = by_raw_id(hotpotqa.HotpotQA(path=str(fx.hotpotqa(tmp_path / "hp"))))
    assert len(items) == 11  # row 0 has two paragraphs
    no_gold = items["5a800003"]  # supporting paragraphs 8 and 9
    assert ids(no_gold) == ["p0", "p1", "p2", "p3", "p4", "p5"]
    assert not any(c.metadata["supporting"] for c in no_gold.components)
    assert no_gold.metadata["gold_in_evidence"] is False and no_gold.metadata["n_supporting_shown"] == 0
    assert no_gold.gold == "answer 3"  # the gold is kept: the question is asked as the dataset asks it
    partial = items["5a800004"]  # supporting paragraphs 2 and 7: only 2 is shown
    assert ids(partial) == ["p0", "p1", "p2", "p3", "p4", "p5"]
    assert partial.metadata["gold_in_evidence"] is False and partial.metadata["n_supporting_shown"] == 1


def test_hotpotqa_docs_by_default_ranks_the_supporting_paragraphs_first(tmp_path, offline):
    items = by_raw_id(hotpotqa.HotpotQADocs(path=str(fx.hotpotqa(tmp_path / "hp"))))
    assert ids(items["5a800003"]) == ["p8", "p9", "p0", "p1", "p2", "p3"]
    assert ids(items["5a800004"]) == ["p2", "p7", "p0", "p1", "p3", "p4"]
    assert [c.metadata["supporting"] for c in items["5a800004"].components] == [True, True] + [False] * 4
    assert all(it.metadata["gold_in_evidence"] for it in items.values())


@pytest.mark.parametrize("cls", [hotpotqa.HotpotQA, hotpotqa.HotpotQADocs])
def test_hotpotqa_gold_first_switch_keeps_every_supporting_paragraph_in_upstream_order(cls, tmp_path, offline):
    items = by_raw_id(cls(path=str(fx.hotpotqa(tmp_path / "hp")), evidence="gold_first"))
    assert ids(items["5a800003"]) == ["p0", "p1", "p2", "p3", "p8", "p9"]
    assert ids(items["5a800004"]) == ["p0", "p1", "p2", "p3", "p4", "p7"]
    assert all(it.metadata["gold_in_evidence"] for it in items.values())


@pytest.mark.parametrize("name", ["hotpotqa", "hotpotqa_docs", "musique"])
def test_the_evidence_configs_declare_the_reference_construction_and_take_the_switch(name):
    cfg = load_option("dataset", name)
    assert instantiate(cfg).evidence is hotpotqa.Evidence.REFERENCE
    assert instantiate(cfg, evidence="gold_first").evidence is GOLD_FIRST


@pytest.mark.parametrize("cls", [hotpotqa.HotpotQA, hotpotqa.HotpotQADocs, musique.MuSiQue])
def test_an_unknown_evidence_value_is_one_clear_error(cls):
    with pytest.raises(ValueError, match=r"dataset \w+: evidence must be one of \['reference', 'gold_first'\], got 'gold'"):
        cls(evidence="gold")


def test_hotpotqa_docs_serves_the_same_rows_as_titled_documents_under_its_own_ids(tmp_path, offline):
    root = fx.hotpotqa(tmp_path / "hp")
    chunks = by_raw_id(hotpotqa.HotpotQA(path=str(root)))
    docs = by_raw_id(hotpotqa.HotpotQADocs(path=str(root)))
    assert chunks.keys() == docs.keys()
    one = next(iter(docs))
    assert docs[one].item_id == f"hotpotqa_docs::{one}" and chunks[one].item_id == f"hotpotqa::{one}"
    assert {c.kind for c in docs[one].components} == {ComponentKind.DOCUMENT}
    assert {c.kind for c in chunks[one].components} == {ComponentKind.TEXT_CHUNK}
    gold_chunks = by_raw_id(hotpotqa.HotpotQA(path=str(root), evidence=GOLD_FIRST))
    gold_docs = by_raw_id(hotpotqa.HotpotQADocs(path=str(root), evidence=GOLD_FIRST))
    assert [c.text for c in gold_docs[one].components] == [c.text for c in gold_chunks[one].components]


def test_musique_by_default_ranks_the_supporting_paragraphs_first_and_keeps_answer_aliases(tmp_path, offline):
    items = musique.MuSiQue(path=str(fx.musique(tmp_path / "mq"))).load_all()
    assert "musique::2hop__5_6" not in {it.item_id for it in items}  # unanswerable
    item = items[0]
    assert ids(item) == ["p3", "p11", "p0", "p1", "p2", "p4"]
    assert [c.id for c in item.components if c.metadata["supporting"]] == ["p3", "p11"]
    assert item.gold_answer == "Person 0" and item.answer_aliases == ("P. 0",) and item.metadata["hops"] == 2
    assert item.metadata["gold_in_evidence"] and item.metadata["n_supporting_shown"] == 2


def test_musique_gold_first_switch_shows_the_same_paragraphs_in_upstream_order(tmp_path, offline):
    items = musique.MuSiQue(path=str(fx.musique(tmp_path / "mq")), evidence="gold_first").load_all()
    assert len(items) == 11 and ids(items[0]) == ["p0", "p1", "p2", "p3", "p4", "p11"]


def test_musique_reference_shows_no_empty_paragraph():
    row = {
        "answer": "x",
        "paragraphs": [
            {"idx": j, "title": "t", "paragraph_text": "" if j == 0 else f"P{j}", "is_supporting": j == 5}
            for j in range(8)
        ],
    }
    assert [p["idx"] for p in musique.supporting_first(row, 6)] == [5, 1, 2, 3, 4]
    assert musique.eligible(row) and not musique.eligible(row, min_paragraphs=6)


@pytest.mark.parametrize(
    "sentence, section",
    [
        ("A 34-year-old woman presents with fatigue.", "narrative"),
        ("Her blood pressure is 120/80 mm Hg and pulse is 90/min.", "labs_exam"),
        ("Physical examination shows a tender abdomen.", "labs_exam"),
        ("Serum sodium level is 130 mmol/L.", "labs_exam"),
        ("An MRI of the brain is shown.", "imaging"),
        ("A biopsy specimen is obtained; the ECG shows ST elevation.", "imaging"),
    ],
)
def test_medxpertqa_sentences_are_labelled_by_the_documented_keyword_rules(sentence, section):
    assert medxpertqa.section_of(sentence) == section


def test_medxpertqa_splits_the_case_into_runs_and_keeps_the_last_sentence_as_the_question():
    sentences, question = medxpertqa.case_and_question(fx.MEDX_CASE)
    assert question == "What is the most likely diagnosis?" and "Answer Choices" not in " ".join(sentences)
    chunks = medxpertqa.chunk_case(sentences)
    assert [sec for sec, _ in chunks] == ["narrative", "labs_exam", "imaging", "narrative"]
    assert (
        chunks[0][1]
        == "A 54-year-old man presents with chest pain for two days. He has a history of smoking."
    )


def test_medxpertqa_items_fix_the_first_image_and_offer_the_five_options(tmp_path, offline):
    root = fx.medxpertqa(tmp_path / "mx")
    items = {it.raw_id: it for it in medxpertqa.MedXpertQA(path=str(root)).load_all()}
    assert "MM-1" not in items  # no case text to chunk
    item = items["MM-2"]
    assert len(item.components) == 4 and {c.kind for c in item.components} == {ComponentKind.TEXT_CHUNK}
    assert [c.id for c in item.fixed] == ["image0"]
    assert item.fixed[0].image.sha256 == hashlib.sha256(fx.image_bytes(20, "JPEG")).hexdigest()
    assert item.choices[0] == "Pneumonia" and item.gold == "Pericarditis"  # label "D"
    every = {it.raw_id: it for it in medxpertqa.MedXpertQA(path=str(root), all_images=True).load_all()}
    assert [c.metadata["file"] for c in every["MM-2"].fixed] == ["MM-2-a.jpeg", "MM-2-b.jpeg"]


def test_multihop_rag_presents_the_evidence_list_as_ranked_titled_documents():
    row = {
        "query": "Q?",
        "answer": "Yes",
        "question_type": "comparison_query",
        "evidence_list": [
            {"title": "T1", "fact": "F1", "source": "S", "published_at": "2023"},
            {"title": "T2", "fact": "F2", "source": "S2", "published_at": "2024"},
        ],
    }
    item = multihop_rag.row_to_item(41, row)
    assert item.item_id == "multihop_rag::41" and item.gold == "Yes"
    assert [(c.kind, c.title, c.text) for c in item.components] == [
        (ComponentKind.DOCUMENT, "T1", "F1"),
        (ComponentKind.DOCUMENT, "T2", "F2"),
    ]
    assert (
        all(c.metadata["supporting"] for c in item.components)
        and item.components[1].metadata["source"] == "S2"
    )
    assert multihop_rag.eligible(row) and not multihop_rag.eligible(
        {**row, "evidence_list": row["evidence_list"][:1]}
    )
