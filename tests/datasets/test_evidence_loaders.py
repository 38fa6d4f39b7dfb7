"""Evidence-chunk and document-rank datasets: HotpotQA (two views), MuSiQue, MedXpertQA, MultiHop-RAG."""

from __future__ import annotations

import hashlib

import pytest
import upstream_fixtures as fx

from facet_probe.datasets import hotpotqa, medxpertqa, multihop_rag, musique
from facet_probe.items import AnswerType, ComponentKind


def test_hotpotqa_keeps_the_supporting_paragraphs_and_the_first_distractors_in_upstream_order():
    row = fx.hotpot_row(4)
    assert hotpotqa.select_paragraphs(row, 6) == [0, 1, 2, 3, 4, 7]
    assert hotpotqa.select_paragraphs(row, 3) == [0, 2, 7]
    item = hotpotqa.row_to_item(row, "hotpotqa", ComponentKind.TEXT_CHUNK)
    assert [c.id for c in item.components] == ["p0", "p1", "p2", "p3", "p4", "p7"]
    supporting = {c.id: c.metadata["supporting"] for c in item.components}
    assert supporting == {"p0": False, "p1": False, "p2": True, "p3": False, "p4": False, "p7": True}
    p7 = item.components[-1]
    assert (
        p7.title == "Title 4-7"
        and p7.text == "Sentence 7.0 of 4. Sentence 7.1."
        and p7.metadata["supporting_sentences"] == [0, 1]
    )
    assert item.answer_type == AnswerType.FREE and item.gold == "answer 4"


def test_hotpotqa_needs_every_supporting_title_among_three_to_six_paragraphs():
    row = fx.hotpot_row(1)
    assert hotpotqa.eligible(row)
    short = {
        **row,
        "context": {"title": row["context"]["title"][:2], "sentences": row["context"]["sentences"][:2]},
    }
    assert not hotpotqa.eligible(short)


def test_hotpotqa_docs_serves_the_same_rows_as_titled_documents_under_its_own_ids(tmp_path, offline):
    root = fx.hotpotqa(tmp_path / "hp")
    chunks = {it.raw_id: it for it in hotpotqa.HotpotQA(path=str(root)).load_all()}
    docs = {it.raw_id: it for it in hotpotqa.HotpotQADocs(path=str(root)).load_all()}
    assert chunks.keys() == docs.keys()
    one = next(iter(docs))
    assert docs[one].item_id == f"hotpotqa_docs::{one}" and chunks[one].item_id == f"hotpotqa::{one}"
    assert {c.kind for c in docs[one].components} == {ComponentKind.DOCUMENT}
    assert {c.kind for c in chunks[one].components} == {ComponentKind.TEXT_CHUNK}
    assert [c.text for c in docs[one].components] == [c.text for c in chunks[one].components]


def test_musique_marks_supporting_paragraphs_and_keeps_answer_aliases(tmp_path, offline):
    items = musique.MuSiQue(path=str(fx.musique(tmp_path / "mq"))).load_all()
    assert "musique::2hop__5_6" not in {it.item_id for it in items}  # unanswerable
    item = items[0]
    assert [c.id for c in item.components] == ["p0", "p1", "p2", "p3", "p4", "p11"]
    assert [c.id for c in item.components if c.metadata["supporting"]] == ["p3", "p11"]
    assert item.gold_answer == "Person 0" and item.answer_aliases == ("P. 0",) and item.metadata["hops"] == 2


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
