"""Upstream-layout fixtures of the image and mixed-modality datasets that hold edge rows: more images or
evidence than the cap, empty strings, missing titles, unicode, leading spaces, duplicate ids, undecodable
images (a struct without bytes), answers out of range. Tiny images (2x2), built offline. Every builder returns
the folder it wrote. `side_by_side` runs the reference's own loader (reference_detail_driver.py) and ours on
them and gives both item lists in one shape.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import upstream_fixtures as fx

TINY = 2  # pixels a side


def img(seed: int, fmt: str = "PNG") -> bytes:
    return fx.image_bytes(seed, fmt, size=TINY)


def hf(seed: int) -> dict:
    return {"bytes": img(seed), "path": f"{seed}.png"}


NO_BYTES = {"bytes": None, "path": "not-on-disk.png"}  # a struct the hub can hold: nothing to decode

# --------------------------------------------------------------------------- Mantis-Eval
MANTIS_OPTIONS = ["(A) a bird", "(B) café ☕", "(C) a dog"]


def mantis_rows() -> list[dict]:
    rows = [
        {"id": f"m{i}", "question_type": "multi-choice", "question": f"<image> <image> <image> Which {i}?",
         "images": [hf(100 * i + j) for j in range(3 + i % 3)], "options": MANTIS_OPTIONS, "answer": "ABC"[i % 3]}
        for i in range(14)
    ]
    edge = [
        ("seven", dict(images=[hf(5000 + j) for j in range(7)])),  # over the cap of 6
        ("two", dict(images=[hf(5100), hf(5101)])),
        ("short", dict(question_type="short-answer")),
        ("unicode", dict(question="  Ünïcode 猫 — which one? <image>\n<image> <image>  ")),
        ("labels", dict(question="Image 1: <image>\nImage 2: <image>\nImage 3: <image>\nWhich image shows a cat?")),
        ("nospace", dict(options=["(A)a bird", "B. a fish", "C) a dog"], answer="(b)")),
        ("answer_text", dict(answer="C: a dog")),
        ("out_of_range", dict(answer="D")),
        ("empty_option", dict(options=["", "(B) a fish", "(C) a dog"])),
        ("empty_question", dict(question="<image><image><image>")),
        ("one_option", dict(options=["(A) only"])),
        ("no_bytes_kept", dict(images=[hf(5200), NO_BYTES, hf(5201), hf(5202)])),
        ("no_bytes_short", dict(images=[hf(5300), NO_BYTES, hf(5301)])),
        ("m3", dict(question="<image> <image> <image> A second row with id m3?")),  # duplicate id
    ]
    for name, change in edge:
        base = {"id": name, "question_type": "multi-choice", "question": f"<image><image><image> Edge {name}?",
                "images": [hf(6000 + len(rows) * 10 + j) for j in range(3)], "options": MANTIS_OPTIONS,
                "answer": "B"}
        rows.append({**base, **change, "data_source": "mantis", "category": "edge"})
    for r in rows:
        r.setdefault("data_source", "mantis")
        r.setdefault("category", "c")
    return rows


def mantis_eval(root: Path) -> Path:
    schema = pa.schema([("id", pa.string()), ("question_type", pa.string()), ("question", pa.string()),
                        ("images", pa.list_(fx.IMAGE)), ("options", pa.list_(pa.string())), ("answer", pa.string()),
                        ("data_source", pa.string()), ("category", pa.string())])
    fx.write_parquet(root / "mantis_eval" / "test-00000-of-00001.parquet", mantis_rows(), schema)
    return root


# --------------------------------------------------------------------------- MedFrameQA
MEDFRAME_OPTIONS = ["Cirrhosis", "Hepatitis", "Abscess", "Cyst", "Tumor"]


def medframe_rows() -> list[dict]:
    rows = []

    def row(qid: str, frames: list, **change) -> dict:
        out = {"question_id": qid, "system": "Digestive", "organ": "liver", "keyword": "k", "modality": "CT",
               "video_id": "v", "question": f"What is seen in {qid}?", "options": MEDFRAME_OPTIONS,
               "image_url": [], "reasoning_chain": "...", "correct_answer": "C"}
        out |= {f"image_{k}": (frames[k - 1] if k <= len(frames) else None) for k in range(1, 6)}
        return out | change

    for i in range(12):
        rows.append(row(f"{i:04d}", [hf(10 * i + k) for k in range(3 + i % 3)], correct_answer="ABCDE"[i % 5]))
    rows += [
        row("two", [hf(7000), hf(7001)]),  # ours 2-5 frames, the reference >= 3
        row("one", [hf(7010)]),
        row("gaps", [None, hf(7020), None, hf(7021), hf(7022)]),  # frames in image_2, image_4, image_5
        row("no_bytes", [hf(7030), NO_BYTES, hf(7031), hf(7032)]),
        row("no_bytes_short", [hf(7040), NO_BYTES, hf(7041)]),
        row("prefixed", [hf(7050 + k) for k in range(3)],
            options=["(A) Cirrhosis", "(B) Hepatitis", "A large cyst", " Tumor ", "E. Abscess"]),
        row("lower", [hf(7060 + k) for k in range(3)], correct_answer=" b"),
        row("answer_text", [hf(7070 + k) for k in range(3)], correct_answer="C. Abscess"),
        row("no_answer", [hf(7080 + k) for k in range(3)], correct_answer=""),
        row("out_of_range", [hf(7090 + k) for k in range(3)], correct_answer="F"),
        row("empty_option", [hf(7100 + k) for k in range(3)], options=["Cirrhosis", "", "Cyst"]),
        row("empty_question", [hf(7110 + k) for k in range(3)], question=""),
        row("unicode", [hf(7120 + k) for k in range(3)], question="  Ünïcode: which lobe — 左 or 右?"),
        row("0001", [hf(7130 + k) for k in range(3)], question="A second row with id 0001?"),
    ]
    return rows


def medframeqa(root: Path) -> Path:
    fields = [("question_id", pa.string()), ("system", pa.string()), ("organ", pa.string()),
              ("keyword", pa.string()), ("modality", pa.string()), ("video_id", pa.string()),
              ("question", pa.string()), ("options", pa.list_(pa.string())), ("image_url", pa.list_(pa.string())),
              ("reasoning_chain", pa.string())]
    fields += [(f"image_{k}", fx.IMAGE) for k in range(1, 6)] + [("correct_answer", pa.string())]
    fx.write_parquet(root / "data" / "test-00000-of-00001.parquet", medframe_rows(), pa.schema(fields))
    return root


# --------------------------------------------------------------------------- MathVision
def mathvision_rows() -> list[dict]:
    def row(rid: str, **change) -> dict:
        out = {"id": rid, "question": f"<image1>\nHow many squares, case {rid}?", "options": ["3", "4", "5", "6"],
               "image": f"images/{rid}.jpg", "decoded_image": hf(999), "answer": "B",
               "solution": None, "level": 2, "subject": "counting"}
        return out | change

    rows = [row(str(i + 1), answer="ABCD"[i % 4], decoded_image=hf(i)) for i in range(8)]
    rows += [
        row("letters", options=list("ABCDE"), answer="C", decoded_image=hf(900)),
        row("paren", answer="(B)", decoded_image=hf(901)),
        row("lower", answer=" c", decoded_image=hf(902)),
        row("two", options=["yes", "no"], answer="A", decoded_image=hf(903)),
        row("free", options=[], answer="12", decoded_image=hf(904)),
        row("no_figure", decoded_image=None),
        row("no_bytes", decoded_image=NO_BYTES),
        row("empty_option", options=["3", "", "5"], decoded_image=hf(905)),
        row("spaces", question="   Which is larger?  ", options=[" 3", "4 ", "  5"], decoded_image=hf(906)),
        row("unicode", question="<image1> Ünïcode: ∠ABC = ?", options=["30°", "45°", "60°"], decoded_image=hf(907)),
        row("placeholder_only", question="<image1>", decoded_image=hf(908)),
        row("out_of_range", answer="E", decoded_image=hf(909)),
        row("3", question="A second row with id 3?", decoded_image=hf(910)),
    ]
    return rows


def mathvision(root: Path) -> Path:
    schema = pa.schema([("id", pa.string()), ("question", pa.string()), ("options", pa.list_(pa.string())),
                        ("image", pa.string()), ("decoded_image", fx.IMAGE), ("answer", pa.string()),
                        ("solution", pa.string()), ("level", pa.int64()), ("subject", pa.string())])
    fx.write_parquet(root / "data" / "testmini-00000-of-00001-f8ff70fcb2f29b1d.parquet", mathvision_rows(), schema)
    return root


# --------------------------------------------------------------------------- both loaders, one shape
DETAIL_DRIVER = Path(__file__).with_name("reference_detail_driver.py")


def driver_rows(rows: list[dict]) -> list[dict]:
    """Rows as `datasets` yields them; an image with bytes as a marker named by its hash (the driver has no
    PIL), one without bytes as it is (the reference cannot decode it either)."""
    return fx.images_replaced(rows, lambda image: {"__image__": "sha256:" + hashlib.sha256(image["bytes"]).hexdigest()}
                              if image["bytes"] else image)


def reference_detail(src: Path, tmp: Path, profile: dict, target: int, rows: list[dict], root: Path,
                     raw_gold: bool = False) -> list[list]:
    """[id, question, components, fixed images, choices, gold, orderings] of each item the reference's own loader
    gives, run by a plain python3 without our package (`raw_gold`: a free answer as stored, not normalised)."""
    python = shutil.which("python3") or sys.executable
    spec = tmp / "spec.json"
    files = {p.name: str(p) for p in root.rglob("*") if p.is_file()}
    spec.write_text(json.dumps({"dataset": profile, "target": target, "rows": driver_rows(rows), "files": files,
                                "raw_gold": raw_gold}))
    proc = subprocess.run([python, str(DETAIL_DRIVER), str(spec)], capture_output=True, text=True, cwd=tmp,
                          env={"PYTHONPATH": str(src), "PATH": "/usr/bin:/bin"}, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return [json.loads(line) for line in proc.stdout.splitlines()]


def shown(component) -> str:
    """A component as the comparison reads it: an image by its bytes' hash, a text (with its title) as shown."""
    if component.image is not None:
        return "sha256:" + component.image.sha256
    return f"{component.title}: {component.text}" if component.title else component.text


def our_detail(items, facet_name: str) -> list[list]:
    """Our items in the reference driver's shape (gold as the reference normalises it for the facet)."""
    from facet_probe.audit.manifest import build_manifest
    from facet_probe.facets.registry import lookup

    facet = lookup(facet_name)()
    out = []
    for item in items:
        orderings = [list(r.permutation) for r in build_manifest([item], facet, k=6, seed=42)]
        if item.gold_index is None:
            gold = item.gold_answer
        else:
            gold = str(item.gold_index) if facet_name == "option_order" else chr(65 + item.gold_index)
        out.append([item.item_id, item.question, [shown(c) for c in facet.orderables(item)],
                    ["sha256:" + c.image.sha256 for c in item.fixed if c.image is not None], list(item.choices),
                    gold, orderings])
    return out


def holdable(reference: list[list], unholdable: dict[str, str]) -> list[list]:
    """The reference's items less those no item can hold and less a repeated id's later items."""
    seen: set[str] = set()
    out = []
    for entry in reference:
        if entry[0] not in unholdable and entry[0] not in seen:
            out.append(entry)
        seen.add(entry[0])
    return out


def skip_counts(reference: list[list], unholdable: dict[str, str]) -> dict[str, int]:
    """The skip counts ours should report for those: {reason: rows}."""
    from collections import Counter

    from facet_probe.datasets.base import REPEATED_ID

    ids = [entry[0] for entry in reference]
    counts = Counter(unholdable[i] for i in ids if i in unholdable)
    counts[REPEATED_ID] += len(ids) - len(set(ids))
    return dict(sorted((k, v) for k, v in counts.items() if v))


# --------------------------------------------------------------------------- MultiModalQA (mixed modality)
def jpg(seed: int) -> bytes:
    return fx.image_bytes(seed, "JPEG", size=TINY)


LONG_TEXT = "   Ünïcode 猫 — " + "long paragraph " * 45  # 700 characters, leading spaces: cut at 500, then stripped


def mmqa_edge(root: Path) -> Path:
    """MMQA_{dev,texts,images}.jsonl.gz and the image archive under both its names (`mmqa_images.zip`, the
    reference's; `final_dataset_images.zip`, upstream's), members at the three places the reference looks."""
    texts = [{"title": f"Page {k}", "url": "u", "id": f"t{k}", "text": f"Paragraph {k}."} for k in range(60)]
    texts += [{"url": "u", "id": "t_untitled", "text": "A page without a title."},
              {"title": "Empty", "url": "u", "id": "t_empty", "text": ""},
              {"title": "Spaces", "url": "u", "id": "t_spaces", "text": "   "},
              {"title": "Long", "url": "u", "id": "t_long", "text": LONG_TEXT}]
    images = [{"title": f"Pic {k}", "url": "u", "id": f"i{k}", "path": f"Pic_{k}.jpg"} for k in range(60)]
    images += [{"url": "u", "id": "i_untitled", "path": "Untitled.png"},
               {"title": "Top", "url": "u", "id": "i_top", "path": "Top.jpg"},
               {"title": "Under images/", "url": "u", "id": "i_dir", "path": "Dir.jpg"},
               {"title": "Not in the archive", "url": "u", "id": "i_missing", "path": "Missing.jpg"}]
    members = {f"final_dataset_images/{im['path']}": jpg(8000 + k) for k, im in enumerate(images[:61])}
    members |= {"Top.jpg": jpg(8100), "images/Dir.jpg": jpg(8101)}

    def row(qid: str, t: list[str], i: list[str], **change) -> dict:
        out = {"qid": qid, "question": f"Which picture shows {qid}?",
               "answers": [{"answer": f"Item {qid}", "type": "string"}, {"answer": f"item {qid}", "type": "string"}],
               "metadata": {"type": "Compose(ImageQ,TextQ)", "modalities": ["image", "text"],
                            "text_doc_ids": t, "image_doc_ids": i, "table_id": "tab"},
               "supporting_context": [{"doc_id": t[0], "doc_part": "text"}, {"doc_id": i[0], "doc_part": "image"}]}
        meta = change.pop("metadata", {})
        return out | change | {"metadata": out["metadata"] | meta}

    rows = [row(f"{q:032x}", [f"t{3 * q + k}" for k in range(3 + q % 2)], [f"i{3 * q + k}" for k in range(3 + q % 3)])
            for q in range(14)]
    rows += [
        row("cap", [f"t{k}" for k in range(40, 46)], [f"i{k}" for k in range(40, 46)]),  # 6 + 6: the first 4 shown
        row("long", ["t_long", "t46", "t47"], ["i46", "i47", "i48"]),
        row("unicode", ["t49", "t50", "t51"], ["i49", "i50", "i51"], question="  Which café ☕ is shown?  "),
        row("empty_text", ["t52", "t_empty", "t53"], ["i52", "i53", "i54"]),
        row("spaces_text", ["t54", "t_spaces", "t55"], ["i55", "i56", "i57"]),
        row("unknown_text", ["t56", "t_nowhere", "t57"], ["i58", "i59", "i0"]),
        row("no_known_text", ["t_a", "t_b", "t_c"], ["i1", "i2", "i3"]),
        row("untitled", ["t_untitled", "t58", "t59"], ["i_untitled", "i_top", "i_dir"]),
        row("table", ["t1", "t2", "t3"], ["i4", "i5", "i6"], metadata={"modalities": ["table", "text", "image"]}),
        row("missing_image", ["t4", "t5", "t6"], ["i7", "i_missing", "i8"],
            metadata={"modalities": ["table", "image"]}),
        row("four_found_late", ["t7", "t8", "t9"], ["i_missing", "i_missing", "i9", "i10", "i11"],
            metadata={"modalities": ["table", "image"]}),  # 2 of the first 4 found: the reference drops it
        row("two_texts", ["t10", "t11"], ["i12", "i13", "i14"]),
        row("empty_question", ["t12", "t13", "t14"], ["i15", "i16", "i17"], question=""),
        row("no_answer", ["t15", "t16", "t17"], ["i18", "i19", "i20"], answers=[]),
        row("number_answer", ["t18", "t19", "t20"], ["i21", "i22", "i23"], answers=[{"answer": 1984}]),
        row(f"{3:032x}", ["t21", "t22", "t23"], ["i24", "i25", "i26"], question="A second row with qid 3?"),
    ]
    fx.write_jsonl(root / "MMQA_dev.jsonl.gz", rows, gz=True)
    fx.write_jsonl(root / "MMQA_texts.jsonl.gz", texts, gz=True)
    fx.write_jsonl(root / "MMQA_images.jsonl.gz", images, gz=True)
    fx.write_zip(root / "mmqa_images.zip", members)
    fx.write_zip(root / "final_dataset_images.zip", members)
    return root


# --------------------------------------------------------------------------- MMDocRAG (mixed modality)
def mmdocrag_edge(root: Path) -> Path:
    """dev_15.jsonl and images.zip (members named exactly by `img_path`)."""
    members: dict[str, bytes] = {}

    def row(q: int | str, n_text: int = 3, n_img: int = 3, **change) -> dict:
        texts = [{"quote_id": f"text{j + 1}", "type": "text", "text": f"Text quote {j} of {q}.", "page_id": j % 3,
                  "layout_id": 2 * j} for j in range(n_text)]
        imgs = [{"quote_id": f"image{j + 1}", "type": "image", "img_path": f"images/doc{q}_{j}.jpg",
                 "img_description": f"A chart {j}.", "page_id": j % 2, "layout_id": 2 * j + 1} for j in range(n_img)]
        for k, im in enumerate(imgs):
            members[im["img_path"]] = jpg(9000 + 10 * len(members) + k)
        out = {"q_id": q, "doc_name": f"doc{q}.pdf", "domain": "Financial report", "question": f"What grew in {q}?",
               "evidence_modality_type": ["text", "image"], "question_type": "multimodal", "text_quotes": texts,
               "img_quotes": imgs, "gold_quotes": ["image1", "text2"], "answer_short": f"Revenue {q}",
               "answer_interleaved": f"Revenue {q} grew. See ![image1]."}
        for key, value in change.items():
            out[key] = value(out) if callable(value) else value
        return out

    def quote_text(j: int, text: str):
        def change(out):
            return [{**t, "text": text} if k == j else t for k, t in enumerate(out["text_quotes"])]
        return change

    rows = [row(q, 3 + q % 3, 3 + q % 2) for q in range(14)]
    rows += [
        row("many", 8, 7),  # 15 quotes
        row("empty_quote", text_quotes=quote_text(1, "")),  # the reference shows it empty
        row("leading", text_quotes=quote_text(0, "  Ünïcode 收入 — leading spaces  "), question="  Which café?  "),
        row("no_text_gold", gold_quotes=["image1", "image2"]),
        row("no_image_gold", gold_quotes=["text1"]),
        row("two_images", n_img=2),
        row("two_texts", n_text=2),
        row("missing_image", n_img=4, answer_short="",  # 3 of 4 found; gold from answer_interleaved
            img_quotes=lambda out: [{**im, "img_path": "images/nowhere.jpg"} if k == 1 else im
                                    for k, im in enumerate(out["img_quotes"])]),
        row("too_few_found", answer_short="",  # 2 of 3 found: the reference drops it (stable: no short answer)
            img_quotes=lambda out: [{**im, "img_path": "images/nowhere.jpg"} if k == 1 else im
                                    for k, im in enumerate(out["img_quotes"])]),
        row("empty_question", question=""),
        row("with_id", id="custom-7"),  # the reference names it by `id`
        row(3, question="A second row with q_id 3?"),
    ]
    fx.write_jsonl(root / "dev_15.jsonl", rows)
    fx.write_zip(root / "images.zip", members)
    return root


# --------------------------------------------------------------------------- MRAMG (mixed modality)
def mramg_edge(root: Path) -> Path:
    """recipe_mqa.jsonl, doc_recipe.jsonl ([id, content, images_list] arrays) and IMAGE.zip (members
    IMAGE/images/RECIPE/<id>.jpg, as the reference reads them)."""
    docs, members = [], {}

    def doc(d: int, content: str, images: list[int]) -> None:
        docs.append([d, content, images])
        for i in images:
            members[f"IMAGE/images/RECIPE/{i}.jpg"] = jpg(i)

    for d in range(16):
        n = 3 + d % 2
        doc(d, "".join(f"Step {k} of recipe {d}. <PIC> " for k in range(n)) + "Serve.", [100 * d + k for k in range(n)])
    doc(20, "Only two. <PIC> Steps. <PIC> Here.", [2000, 2001])  # 3 texts, 2 images: the reference drops it
    doc(21, "   Ünïcode crème brûlée —  <PIC>Whisk.<PIC><PIC> Bake ☕. <PIC>   Cool.  ", [2100, 2101, 2102, 2103])
    doc(22, "Three markers. <PIC> but <PIC> two images. <PIC> Done.", [2200, 2201])  # ours refuses; reference
    doc(23, "A second document. <PIC> Its parts. <PIC> Three. <PIC> Here.", [2300, 2301, 2302])
    members["IMAGE/images/WIKI/0.jpg"] = jpg(1)  # another sub-dataset, the same file name as recipe image 0

    def q(qid: str, provenance: list, images: list, **change) -> dict:
        return {"id": qid, "question": f"How do I make {qid}?", "provenance": provenance,
                "ground_truth": f"Follow the steps of {qid}. <PIC> Then serve.", "images_list": images} | change

    rows = [q(f"RECIPE_{k}", [k], [100 * k + j for j in range(3 + k % 2)]) for k in range(14)]
    rows += [
        q("short_list", [14], [1400]),  # padded with its last entry
        q("long_list", [15], [1500, 1501, 1502, 1503, 1, 2]),  # the first 4 slots used
        q("empty_list", [0], []),  # the reference drops it
        q("missing_image", [1], [100, 999999, 101]),  # not in the archive: the reference drops it
        q("two_docs", [23, 1], [2300, 2301, 2302]),  # the reference reads the first document only
        q("few_parts", [20], [2000, 2001]),
        q("unicode", [21], [2100, 2101, 2102, 2103], question="  Wie macht man Crème brûlée? ☕ "),
        q("mismatch", [22], [2200, 2201, 2201]),
        q("string_provenance", ["2"], [200, 201, 202]),
        q("missing_doc", [999], [0, 1, 2]),
        q("empty_question", [3], [300, 301, 302], question=""),
        q("empty_answer", [4], [400, 401, 402], ground_truth=""),
        q("RECIPE_5", [5], [500, 501, 502], question="A second row with id RECIPE_5?"),
    ]
    fx.write_jsonl(root / "doc_recipe.jsonl", docs)
    fx.write_jsonl(root / "recipe_mqa.jsonl", rows)
    fx.write_zip(root / "IMAGE.zip", members)
    return root
