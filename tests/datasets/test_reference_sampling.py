"""`dataset.sampling=reference`: the reference runner's own loaders, run on the same fixture files, pick the
same items in the same order under the same ids as ours (yahskapar/facet-probe `paper_loaders.py`)."""

from __future__ import annotations

import json
import random
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import upstream_fixtures as fx

from facet_probe.core.errors import ConfigError
from facet_probe.core.permutations import sample_permutations
from facet_probe.datasets import (
    commonsense_qa,
    hotpotqa,
    mantis_eval,
    mathvision,
    medframeqa,
    medxpertqa,
    mmdocrag,
    mmlu_pro,
    multihop_rag,
    musique,
)
from facet_probe.datasets.reference_sampling import Draw, ReferenceSelection, Sampling, reference_select
from facet_probe.datasets.synthetic.mcq import SyntheticMCQ
from facet_probe_dev.testing.in_process import run_module

MIRROR = Path("/work/.mirror/yahskapar+facet-probe/repo")
DRIVER = Path(__file__).with_name("reference_driver.py")
ROWS = 120  # fixture rows per dataset: more than most buffers, so the buffer cut is exercised


def rewrite_parquet(file: Path, change) -> None:
    """Apply `change(i, row)` to every row of a fixture parquet file (schema kept)."""
    table = pq.read_table(file)
    rows = table.to_pylist()
    for i, row in enumerate(rows):
        change(i, row)
    fx.write_parquet(file, rows, table.schema)


def rewrite_jsonl(file: Path, change) -> None:
    rows = [json.loads(line) for line in file.read_text().splitlines() if line]
    for i, row in enumerate(rows):
        change(i, row)
    fx.write_jsonl(file, rows)


def as_driver_rows(rows: list[dict]) -> list[dict]:
    """Rows as `datasets` yields them, images as markers (the driver has no PIL)."""
    return fx.images_replaced(rows, lambda image: {"__image__": image.get("path")})


def parquet_rows(root: Path, pattern: str) -> list[dict]:
    return [r for f in sorted(root.glob(pattern)) for r in pq.read_table(f).to_pylist()]


# Each case: (our loader, options, fixture builder, how the reference reads the rows, its profile, target).
# The fixtures are tweaked where our filter and the reference's differ on purpose, so that both filters
# agree on every row (the draw and the ids are what is compared here).
def _mmlu(root):
    fx.mmlu_pro(root, ROWS)
    return parquet_rows(root, "data/test-*.parquet")


def _csqa(root):
    fx.commonsense_qa(root, ROWS)
    return parquet_rows(root, "data/validation-*.parquet")


def _hotpot(root):
    fx.hotpotqa(root, ROWS)
    return parquet_rows(root, "distractor/validation-*.parquet")


def _musique(root):
    fx.musique(root, ROWS)
    file = root / "musique_ans_v1.0_dev.jsonl"
    rewrite_jsonl(file, lambda i, r: r.update(answerable=True))  # the real `ans` file holds answerable ones only
    rewrite_jsonl(file, lambda i, r: r.update(paragraphs=r["paragraphs"][:2]) if i % 9 == 4 else None)
    return [json.loads(line) for line in file.read_text().splitlines() if line]


def _multihop(root):
    fx.multihop_rag(root, ROWS)  # a sixth of the queries have 7 evidence items: the reference keeps the first 6
    return json.loads((root / "MultiHopRAG.json").read_text())


def _mantis(root):
    fx.mantis_eval(root, ROWS)
    file = root / "mantis_eval" / "test-00000-of-00001.parquet"
    rewrite_parquet(file, lambda i, r: r.update(images=r["images"][:5]))  # ours skips > 6, the reference cuts
    return parquet_rows(root, "mantis_eval/test-*.parquet")


def _medframe(root):
    fx.medframeqa(root, ROWS)
    file = root / "data" / "test-00000-of-00001.parquet"
    # ours takes 2-5 frames, the reference >= 3: give the 2-frame rows a third one
    rewrite_parquet(file, lambda i, r: r.update(image_3=fx.hf_image(9000 + i)) if r["image_3"] is None
                    and r["image_2"] is not None else None)
    return parquet_rows(root, "data/test-*.parquet")


def _mathvision(root):
    fx.mathvision(root)
    return parquet_rows(root, "data/testmini-*.parquet")


def _mmdocrag(root):
    fx.mmdocrag(root, ROWS, images_per_row=3)
    return []


CASES = {
    "mmlu_pro": (mmlu_pro.MMLUPro, {}, _mmlu, dict(name="mmlu_pro", hf_repo="TIGER-Lab/MMLU-Pro", split="test",
                                                     facets=["option_order"]), 10),
    "commonsense_qa": (commonsense_qa.CommonsenseQA, {}, _csqa,
                       dict(name="commonsenseqa", hf_repo="tau/commonsense_qa", split="validation",
                            facets=["option_order"]), 20),
    "commonsense_qa_all_rows": (commonsense_qa.CommonsenseQA, {}, _csqa,
                                dict(name="commonsenseqa", hf_repo="tau/commonsense_qa", split="validation",
                                     facets=["option_order"]), 50),  # buffer 200 > 120 rows: all are read
    "hotpotqa": (hotpotqa.HotpotQA, {}, _hotpot,
                 dict(name="hotpotqa", hf_repo="hotpotqa/hotpot_qa", split="validation",
                      facets=["evidence_chunk_order"]), 40),
    "hotpotqa_docs": (hotpotqa.HotpotQADocs, {}, _hotpot,
                      dict(name="hotpotqa", hf_repo="hotpotqa/hotpot_qa", split="validation",
                           facets=["document_rank_order"]), 20),
    "musique": (musique.MuSiQue, {}, _musique,
                dict(name="musique", hf_repo="dgslibisey/MuSiQue", split="validation",
                     facets=["evidence_chunk_order"]), 40),
    "multihop_rag": (multihop_rag.MultiHopRAG, {}, _multihop,
                     dict(name="multihop_rag", hf_repo="yixuantt/MultiHopRAG", split="train",
                          facets=["document_rank_order"]), 30),
    "mantis_eval": (mantis_eval.MantisEval, {}, _mantis,
                    dict(name="mantis_eval", hf_repo="TIGER-Lab/Mantis-Eval", split="test",
                         facets=["image_set_order"]), 20),
    "medframeqa": (medframeqa.MedFrameQA, {}, _medframe,
                   dict(name="medframeqa", hf_repo="SuhaoYu1020/MedFrameQA", split="test",
                        facets=["image_set_order"]), 15),
    "mathvision": (mathvision.MathVision, {"skip_letter_options": False}, _mathvision,
                   dict(name="mathvision", hf_repo="MathLLMs/MathVision", split="testmini",
                        facets=["option_order"]), 4),
    "mmdocrag": (mmdocrag.MMDocRAG, {"min_text": 3, "min_images": 3}, _mmdocrag,
                 dict(name="mmdocrag", hf_repo="MMDocIR/MMDocRAG", split="file-backed",
                      facets=["mixed_modality_order"]), 20),
}


SAME_QUESTION = {"multihop_rag", "mmdocrag", "mmlu_pro", "commonsense_qa", "hotpotqa", "hotpotqa_docs", "musique"}


@pytest.fixture(scope="module")
def reference_src(tmp_path_factory) -> Path:
    """The reference's `src/` from a `git archive` of its mirror (read, never vendored)."""
    if not MIRROR.is_dir() or shutil.which("git") is None:
        pytest.skip("the reference mirror is not on this machine")
    out = tmp_path_factory.mktemp("reference")
    archive = subprocess.run(["git", "-C", str(MIRROR), "archive", "HEAD", "src"], capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", str(out)], input=archive.stdout, check=True)
    return out / "src"


def reference_items(src: Path, tmp: Path, profile: dict, target: int, rows: list[dict], root: Path) -> list[dict]:
    """{id, question, contents, orderings} of each item the reference's own loader gives, run by a plain python3
    without our package."""
    python = shutil.which("python3") or sys.executable
    spec = tmp / "spec.json"
    files = {name: str(p) for p in root.rglob("*") if p.is_file() for name in (p.name, p.relative_to(root).as_posix())}
    given = None if rows is None else as_driver_rows(rows)  # None: the reference reads the files itself
    spec.write_text(json.dumps({"dataset": profile, "target": target, "rows": given, "files": files}))
    # a real process: the reference's own loaders under a plain python3, without our package or its imports
    proc = subprocess.run([python, str(DRIVER), str(spec)], capture_output=True, text=True, cwd=tmp,
                          env={"PYTHONPATH": str(src), "PATH": "/usr/bin:/bin"}, timeout=120)
    if proc.returncode and "No module named" in proc.stderr:
        pytest.skip(f"the reference's loaders do not import here: {proc.stderr.splitlines()[-1]}")
    assert proc.returncode == 0, proc.stderr
    return [json.loads(line) for line in proc.stdout.splitlines()]


@pytest.mark.parametrize("case", sorted(CASES))
def test_reference_sampling_gives_the_reference_runners_items_and_ids(case, reference_src, tmp_path, offline):
    loader_cls, options, build, profile, target = CASES[case]
    root = tmp_path / "data"
    rows = build(root)
    reference = reference_items(reference_src, tmp_path, profile, target, rows, root)
    expected = [r["id"] for r in reference]
    ours = loader_cls(path=str(root), n=target, sampling="reference", cache=False, **options).load()
    assert [it.item_id for it in ours] == expected
    if case in SAME_QUESTION:  # ids made of positions (multihop_rag, mmdocrag): the same rows behind them
        assert [it.question for it in ours] == [r["question"] for r in reference]
    assert len(expected) >= min(target, 4)  # the comparison is not vacuous
    stable = loader_cls(path=str(root), n=target, cache=False, **options).load()
    assert [it.item_id for it in stable] != expected  # the default is our own prefix-stable draw


def test_limit_is_the_reference_runners_target_and_our_id_is_kept(tmp_path, offline):
    """The reference runner passes `limit` as its target (a smaller buffer), so limit=5 is not the first 5
    of n=20 there; the stable id stays in the metadata."""
    root = fx.commonsense_qa(tmp_path / "c", ROWS)
    loader = commonsense_qa.CommonsenseQA(path=str(root), n=20, sampling="reference", cache=False)
    five = loader.load(limit=5)
    assert len(five) == 5 and all(it.item_id.startswith("commonsenseqa::") for it in five)
    assert five[0].metadata["stable_item_id"] == "commonsense_qa::" + five[0].item_id.split("::")[1]
    independent = [r["id"] for r in shuffled_first(parquet_rows(root, "data/validation-*.parquet"), 5 * 4, 42)
                   if r["answerKey"]][:5]
    assert [it.item_id for it in five] == [f"commonsenseqa::{i}" for i in independent]


def shuffled_first(rows: list, size: int, seed: int) -> list:
    """The rule written out independently: the first `size` rows, `random.Random(seed).shuffle`d."""
    buf = list(rows[:size])
    random.Random(seed).shuffle(buf)
    return buf


def test_the_three_draws_on_plain_values():
    rows = list(range(30))
    even = lambda r: r if r % 2 == 0 else None  # noqa: E731
    buffered = reference_select(ReferenceSelection("x", Draw.BUFFER, 5, seed=7, multiplier=2), 4, lambda: rows, even)
    assert [v for _, v in buffered] == [r for r in shuffled_first(rows, 8, 7) if r % 2 == 0][:4]
    eligible = reference_select(ReferenceSelection("x", Draw.ELIGIBLE, 5, seed=7), None, lambda: rows, even)
    assert [v for _, v in eligible] == shuffled_first([r for r in rows if r % 2 == 0], 99, 7)[:5]
    upstream = reference_select(ReferenceSelection("x", Draw.UPSTREAM, 3), None, lambda: rows, even)
    assert [v for _, v in upstream] == [0, 2, 4]


def test_a_dataset_the_reference_lacks_or_a_bad_mode_is_one_clear_error():
    with pytest.raises(ConfigError, match="reference has no such dataset; use dataset.sampling=stable"):
        SyntheticMCQ(name="synthetic_mcq", sampling="reference")
    with pytest.raises(ConfigError, match="valid: stable, reference"):
        SyntheticMCQ(name="synthetic_mcq", sampling="hash")
    assert SyntheticMCQ(name="synthetic_mcq").sampling is Sampling.STABLE


@pytest.mark.slow  # 1.5 s or more: left out of `make test-fast`
def test_an_audit_under_reference_sampling_has_its_own_folder_and_the_references_ids(tmp_path, offline):
    root = fx.commonsense_qa(tmp_path / "c", ROWS)
    out = tmp_path / "out"

    def audit(*extra):
        return run_module("facet_probe", "model=oracle", "facet=option_order", "dataset=commonsense_qa",
                       f"dataset.path={root}", "limit=3", "k=2", "progress=false", f"out_root={out}", *extra,
                       cwd=Path(__file__).resolve().parents[2])

    assert (proc := audit("dataset.sampling=reference")).returncode == 0, proc.stderr
    assert (proc := audit()).returncode == 0, proc.stderr
    folders = sorted(p.parent for p in out.rglob("items.jsonl"))
    assert len(folders) == 2  # the mode is a setting of the run: never one folder for both
    reference = next(f for f in folders if "sampling: reference" in (f / "config.yaml").read_text())
    ids = [json.loads(line)["item_id"] for line in (reference / "items.jsonl").read_text().splitlines()]
    assert len(ids) == 3 and all(i.startswith("commonsenseqa::") for i in ids)
    assert "sampling: reference" in (reference / "config.yaml").read_text()


# Edge rows (upstream_fixtures' `edges=True`): empty strings, missing titles, more evidence than the cap,
# unicode, leading spaces, repeated ids. The target reads every row, so both sides take every row that passes.
EDGE_ROWS = 24
EDGE_CASES = {
    "mmlu_pro": (mmlu_pro.MMLUPro, lambda root: fx.mmlu_pro(root, EDGE_ROWS, edges=True), "data/test-*.parquet"),
    "commonsense_qa": (commonsense_qa.CommonsenseQA, lambda root: fx.commonsense_qa(root, EDGE_ROWS, edges=True),
                       "data/validation-*.parquet"),
    "hotpotqa": (hotpotqa.HotpotQA, lambda root: fx.hotpotqa(root, EDGE_ROWS, edges=True),
                 "distractor/validation-*.parquet"),
    "hotpotqa_docs": (hotpotqa.HotpotQADocs, lambda root: fx.hotpotqa(root, EDGE_ROWS, edges=True),
                      "distractor/validation-*.parquet"),
    "musique": (musique.MuSiQue, lambda root: fx.musique(root, EDGE_ROWS, edges=True), "musique_ans_v1.0_dev.jsonl"),
    "multihop_rag": (multihop_rag.MultiHopRAG, lambda root: fx.multihop_rag(root, EDGE_ROWS, edges=True),
                     "MultiHopRAG.json"),
    # rows None: the reference reads MM/test.jsonl and images.zip itself (its fallback from `load_dataset`)
    "medxpertqa": (medxpertqa.MedXpertQA, lambda root: fx.medxpertqa(root, EDGE_ROWS, edges=True), None),
}
#: The reference's profile of an edge case not among CASES.
EDGE_PROFILES = {"medxpertqa": dict(name="medxpertqa", hf_repo="TsinghuaC3I/MedXpertQA", split="test", config="MM",
                                    facets=["evidence_chunk_order"])}


def upstream_rows(root: Path, pattern: str | None) -> list[dict] | None:
    if pattern is None:
        return None
    file = next(root.glob(pattern))
    if file.suffix == ".parquet":
        return parquet_rows(root, pattern)
    if file.suffix == ".jsonl":
        return [json.loads(line) for line in file.read_text().splitlines() if line]
    return json.loads(file.read_text())


def shown(item) -> list[str]:
    """An item's orderable texts as the reference writes them: the options, or `title: text` per component."""
    if item.choices and not item.components:  # option_order: the options are what is ordered
        return list(item.choices)
    return [f"{c.title}: {c.text}" if c.title else c.text for c in item.components]


@pytest.mark.parametrize("case", sorted(EDGE_CASES))
def test_edge_rows_as_the_reference_loader_to_the_byte(case, reference_src, tmp_path, offline):
    """Ids, order, question, component texts and K=6 orderings equal the reference loader's own on edge rows;
    the two rows no item can hold as the reference keeps them (an empty question, a repeated id after its
    first row) are left out, counted by reason, in both sampling modes (docs/compatibility.md)."""
    loader_cls, build, pattern = EDGE_CASES[case]
    profile = EDGE_PROFILES[case] if case in EDGE_PROFILES else CASES[case][3]
    root = build(tmp_path / "data")
    reference = reference_items(reference_src, tmp_path, profile, EDGE_ROWS, upstream_rows(root, pattern), root)
    seen: set[str] = set()
    expected = [r for r in reference if r["question"].strip() and not (r["id"] in seen or seen.add(r["id"]))]
    loader = loader_cls(path=str(root), n=EDGE_ROWS, sampling="reference", cache=False)
    ours = loader.load()
    assert [it.item_id for it in ours] == [r["id"] for r in expected]
    assert [it.question for it in ours] == [r["question"] for r in expected]
    assert [shown(it) for it in ours] == [r["contents"] for r in expected]
    assert [[list(p) for p in sample_permutations(len(shown(it)), 6, 42, it.item_id)] for it in ours] == \
        [r["orderings"] for r in expected]
    assert [list(it.choices) for it in ours] == [r["choices"] for r in expected]
    assert all(r["gold"] in (str(it.gold_index), chr(65 + it.gold_index)) for it, r in zip(ours, expected, strict=True)
               if it.choices)  # the reference writes an option_order gold as its index, an evidence one as a letter
    assert [[c.image.sha256 for c in it.fixed] for it in ours] == [r["fixed"] for r in expected]
    left_out = len(reference) - len(expected)
    assert left_out >= 1 and sum(loader.skipped.values()) == left_out, loader.skipped
    stable = loader_cls(path=str(root), n=EDGE_ROWS, cache=False)  # ours: no crash, the same rows named
    assert stable.load() and stable.skipped.get("the question is empty") in (1, None)
    assert sum(stable.skipped.values()) >= 1


@pytest.mark.parametrize("sampling", ["stable", "reference"])
def test_an_edge_row_neither_refuses_nor_crashes_an_audit_and_the_run_names_it(sampling, tmp_path, offline):
    """An MMLU-Pro row with an empty option, one with an empty question and a repeated id: the audit runs; its
    run_status.json names each row left out by reason (the reference's own items keep the empty option)."""
    from facet_probe import api

    root = fx.mmlu_pro(tmp_path / "m", 12, edges=True)  # 10 rows of 4+ options; the reference's draw reads them all
    run = api.audit(["model=oracle", "facet=option_order", "dataset=mmlu_pro", f"dataset.path={root}", "k=2",
                     f"dataset.sampling={sampling}", "dataset.n=10", "dataset.allow_partial=true", "progress=false",
                     "bootstrap=10", f"out_root={tmp_path / 'out'}"]).run_dir
    (cell,) = json.loads((run / "run_status.json").read_text())["cells"]
    empty_option = {"an option is empty (dataset.sampling=reference keeps it, as the reference does)": 2}
    assert cell["items"] == (6 if sampling == "stable" else 8) and cell["skipped_rows"] == {
        "repeats an earlier row's id (the first kept)": 1, "the question is empty": 1,
        **(empty_option if sampling == "stable" else {})}
    items = [json.loads(line) for line in (run / "items.jsonl").read_text().splitlines()]
    assert any("" in it["choices"] for it in items) is (sampling == "reference")


@pytest.mark.slow  # 1.5 s or more: left out of `make test-fast`
def test_the_run_names_its_skipped_rows_in_its_log_and_in_every_report(tmp_path, offline, caplog):
    """Rows no item can hold are named where a user reads about the run (issue 42, point 3): the audit's end-of-run
    log, report.md's provenance, and a report over several run folders (each run's own line)."""
    import logging

    from facet_probe import api

    root = fx.mmlu_pro(tmp_path / "m", 12, edges=True)
    caplog.set_level(logging.INFO, logger="facet_probe")
    run = api.audit(["model=oracle", "facet=option_order", "dataset=mmlu_pro", f"dataset.path={root}", "k=2",
                     "dataset.n=10", "dataset.allow_partial=true", "progress=false", "bootstrap=10",
                     f"out_root={tmp_path / 'out'}"]).run_dir
    line = ("mmlu_pro: 4 rows skipped (2 x an option is empty (dataset.sampling=reference keeps it, as the reference "
            "does); 1 x repeats an earlier row's id (the first kept); 1 x the question is empty)")
    assert f"{line}: rows no item can hold, left out" in caplog.text
    shown = f"  - data: {line}, no item can hold them"
    assert shown in (run / "report.md").read_text()
    other = shutil.copytree(run, tmp_path / "again" / run.name)  # a second run folder: the same run's copy
    both = api.report({"input": [str(run), str(other)], "out": str(tmp_path / "both"), "bootstrap": 10}).run_dir
    assert (both / "report.md").read_text().count(shown) == 2  # one line under each run
