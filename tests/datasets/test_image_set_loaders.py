"""Image-set datasets: Mantis-Eval and MedFrameQA images become the orderable components, screened."""

from __future__ import annotations

import hashlib

import pyarrow.parquet as pq
import pytest
import upstream_fixtures as fx
import upstream_image_fixtures as efx
from test_reference_sampling import reference_src  # noqa: F401  (the reference's src, a pytest fixture)

from facet_probe.core.items import ComponentKind
from facet_probe.datasets import mantis_eval, mathvision, medframeqa
from facet_probe.datasets.screen import METADATA_KEY


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def test_mantis_eval_items_carry_their_images_in_upstream_order_and_fixed_options(tmp_path, offline):
    items = {
        it.raw_id: it for it in mantis_eval.MantisEval(path=str(fx.mantis_eval(tmp_path / "m"))).load_all()
    }
    item = items["mantis-2"]  # four images, "<image><image><image><image> What do these ..."
    assert [c.kind for c in item.components] == [ComponentKind.IMAGE] * 4
    assert [c.image.sha256 for c in item.components] == [sha(fx.image_bytes(200 + j)) for j in range(4)]
    assert item.choices == ("a bird", "a fish", "a dog") and item.gold == "a dog"  # answer "C"
    assert item.question == "What do these pictures have in common?"
    assert item.metadata["question_raw"].startswith("<image><image>")


def test_mantis_eval_keeps_multi_choice_items_with_three_to_six_images():
    row = {"question_type": "multi-choice", "images": [{}] * 3, "options": ["(A) x", "(B) y"], "answer": "B"}
    assert mantis_eval.eligible(row)
    assert not mantis_eval.eligible({**row, "images": [{}] * 2})
    assert not mantis_eval.eligible({**row, "images": [{}] * 7})
    assert not mantis_eval.eligible({**row, "question_type": "short-answer"})
    assert not mantis_eval.eligible({**row, "answer": "D"})


def test_mantis_eval_items_store_the_position_screen_verdict(tmp_path, offline):
    items = {
        it.raw_id: it for it in mantis_eval.MantisEval(path=str(fx.mantis_eval(tmp_path / "m"))).load_all()
    }
    assert items["mantis-0"].metadata[METADATA_KEY]["verdict"] == "keep"  # leading placeholders only
    # "Image 1: <image> ... Which image shows a cat?" with content options: the reference's rules drop the
    # slot labels and flag q_which_image (borderline: excluded only with image-index options)
    which = items["mantis-1"].metadata[METADATA_KEY]
    assert which["verdict"] == "borderline" and which["reasons"] == ["q_which_image (question: 'Which image')"]
    assert items["mantis-3"].metadata[METADATA_KEY]["verdict"] == "exclude"  # "the first image and the last"
    ours = {it.raw_id: it for it in mantis_eval.MantisEval(path=str(tmp_path / "m"), screen_rules="ours").load_all()}
    excluded = ours["mantis-1"].metadata[METADATA_KEY]  # position-screen-v1 reads the "Image 1:" label
    assert excluded["verdict"] == "exclude" and any("numbered_image" in r for r in excluded["reasons"])


def test_medframeqa_reads_the_non_empty_frame_columns_in_order(tmp_path, offline):
    items = {
        it.raw_id: it for it in medframeqa.MedFrameQA(path=str(fx.medframeqa(tmp_path / "f"))).load_all()
    }
    assert "0003" not in items  # a single frame
    item = items["0002"]  # five frames
    assert [c.image.sha256 for c in item.components] == [sha(fx.image_bytes(20 + k)) for k in range(1, 6)]
    assert item.gold == "Abscess" and item.metadata["modality"] == "CT"
    assert items["0000"].metadata[METADATA_KEY]["verdict"] == "keep"
    assert items["0001"].metadata[METADATA_KEY]["verdict"] == "exclude"  # "In the first image ..."
    assert items["0002"].metadata[METADATA_KEY]["verdict"] == "borderline"  # "on the left of the liver"


def test_medframeqa_frame_columns_sort_numerically():
    assert medframeqa.frame_columns(["image_10", "image_2", "image_url", "image_1"]) == [
        "image_1",
        "image_2",
        "image_10",
    ]


# --------------------------------------------------------------------------- side by side with the reference
# (our loader, its facet, edge fixture, the reference's profile, target). The target covers every row, so every
# edge row passes through both filters.
SIDE_BY_SIDE = {
    "mantis_eval": (mantis_eval.MantisEval, "image_set_order", efx.mantis_eval,
                    dict(name="mantis_eval", hf_repo="TIGER-Lab/Mantis-Eval", split="test",
                         facets=["image_set_order"]), 40),
    "medframeqa": (medframeqa.MedFrameQA, "image_set_order", efx.medframeqa,
                   dict(name="medframeqa", hf_repo="SuhaoYu1020/MedFrameQA", split="test",
                        facets=["image_set_order"]), 30),
    "mathvision": (mathvision.MathVision, "option_order", efx.mathvision,
                   dict(name="mathvision", hf_repo="MathLLMs/MathVision", split="testmini",
                        facets=["option_order"]), 30),
}


#: rows the reference keeps and no item can hold (skipped and counted by ours), by the reason ours gives
UNHOLDABLE = {
    "mantis_eval": {"mantis_eval::out_of_range": "the answer letter is not among the options",
                    "mantis_eval::empty_question": "the question is empty"},
    "medframeqa": {"medframeqa::out_of_range": "the answer letter is not among the options",
                   "medframeqa::empty_question": "the question is empty"},
    "mathvision": {},  # its empty option is kept, as the reference keeps it
}


@pytest.mark.parametrize("case", sorted(SIDE_BY_SIDE))
def test_reference_sampling_equals_the_references_own_loader_on_edge_rows(case, reference_src, tmp_path,  # noqa: F811
                                                                         offline):
    """ids, order, question, images (bytes, order), choices, gold and the K=6 orderings, item by item; the rows
    the reference keeps that no item can hold (and a repeated id's later rows) are skipped and counted."""
    loader_cls, facet, build, profile, target = SIDE_BY_SIDE[case]
    root = build(tmp_path / "data")
    rows = [r for f in sorted(root.rglob("*.parquet")) for r in pq.read_table(f).to_pylist()]
    reference = efx.reference_detail(reference_src, tmp_path, profile, target, rows, root)
    loader = loader_cls(path=str(root), n=target, sampling="reference", cache=False)
    ours = efx.our_detail(loader.load(), facet)
    expected = efx.holdable(reference, UNHOLDABLE[case])
    assert len(expected) >= 10 and len(expected) < len(reference)  # not vacuous; edge rows reached
    assert [r[0] for r in ours] == [r[0] for r in expected]
    for mine, theirs in zip(ours, expected, strict=True):
        assert mine == theirs
    assert loader.skipped == efx.skip_counts(reference, UNHOLDABLE[case])
