"""Image-set datasets: Mantis-Eval and MedFrameQA images become the orderable components, screened."""

from __future__ import annotations

import hashlib

import upstream_fixtures as fx

from facet_probe.datasets import mantis_eval, medframeqa
from facet_probe.datasets.screen import METADATA_KEY
from facet_probe.items import ComponentKind


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
