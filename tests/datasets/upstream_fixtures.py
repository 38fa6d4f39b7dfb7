"""Small local copies of each upstream dataset, written in the upstream layout and schema.

Same file names, columns, nested structures and image encodings as the published repositories
(Hugging Face image columns as `{"bytes", "path"}` structs, zip archives for image folders), so the
loaders are tested on what they will read. Every builder returns the folder it wrote.
"""

from __future__ import annotations

import gzip
import io
import json
import zipfile
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from PIL import Image

IMAGE = pa.struct([("bytes", pa.binary()), ("path", pa.string())])


def image_bytes(seed: int, fmt: str = "PNG", size: int = 8) -> bytes:
    """A tiny distinct image (its colour depends on `seed`)."""
    img = Image.new("RGB", (size, size), ((seed * 37) % 256, (seed * 91) % 256, (seed * 53) % 256))
    buf = io.BytesIO()
    img.save(buf, format=fmt)
    return buf.getvalue()


def hf_image(seed: int, name: str | None = None) -> dict:
    return {"bytes": image_bytes(seed), "path": name or f"{seed}.png"}


def images_replaced(rows: list[dict], image) -> list[dict]:
    """Rows as `datasets` yields them, with every image (a dict holding `bytes`) replaced by `image(value)`: the
    reference drivers run without PIL, so they see markers."""
    def plain(value):
        if isinstance(value, dict) and "bytes" in value:
            return image(value)
        if isinstance(value, dict):
            return {k: plain(v) for k, v in value.items()}
        if isinstance(value, list):
            return [plain(v) for v in value]
        return value
    return [plain(r) for r in rows]


def write_parquet(file: Path, rows: list[dict], schema: pa.Schema) -> Path:
    file.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), file, row_group_size=4)
    return file


def write_jsonl(file: Path, rows: list, gz: bool = False) -> Path:
    file.parent.mkdir(parents=True, exist_ok=True)
    text = "".join(json.dumps(r) + "\n" for r in rows)
    if gz:
        with gzip.open(file, "wt", encoding="utf-8") as fh:
            fh.write(text)
    else:
        file.write_text(text, encoding="utf-8")
    return file


def write_zip(file: Path, members: dict[str, bytes]) -> Path:
    file.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(file, "w") as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return file


# --------------------------------------------------------------------------- option order
def mmlu_pro(root: Path, n: int = 30, edges: bool = False) -> Path:
    """`edges`: rows the reference keeps as they are (an empty option, unicode, leading spaces), an empty
    question and a repeated id (each kept by the reference)."""
    schema = pa.schema(
        [
            ("question_id", pa.int64()),
            ("question", pa.string()),
            ("options", pa.list_(pa.string())),
            ("answer", pa.string()),
            ("answer_index", pa.int64()),
            ("cot_content", pa.string()),
            ("category", pa.string()),
            ("src", pa.string()),
        ]
    )
    rows = []
    for i in range(n):
        k = 3 if i % 10 == 0 else 10  # every tenth row has only 3 options (filtered out)
        rows.append(
            {
                "question_id": 70 + i,
                "question": f"Question {i}?",
                "options": [f"opt {i}.{j}" for j in range(k)],
                "answer": "BCD"[i % 3],
                "answer_index": 1 + i % 3,
                "cot_content": "",
                "category": "math",
                "src": "ori_mmlu",
            }
        )
    if edges:
        rows[1]["options"][4] = ""
        rows[2].update(question="  Leading spaces – Ω≈ç √ 東京?", options=[" lead", "Ünïcödé ✓", *rows[2]["options"][2:]])
        rows[3]["question"] = ""
        rows[5]["question_id"] = rows[4]["question_id"]
        rows[6]["options"][0] = " "
    write_parquet(root / "data" / "test-00000-of-00001.parquet", rows, schema)
    return root


def commonsense_qa(root: Path, n: int = 20, edges: bool = False) -> Path:
    """`edges`: as `mmlu_pro`'s, for CommonsenseQA's columns."""
    schema = pa.schema(
        [
            ("id", pa.string()),
            ("question", pa.string()),
            ("question_concept", pa.string()),
            ("choices", pa.struct([("label", pa.list_(pa.string())), ("text", pa.list_(pa.string()))])),
            ("answerKey", pa.string()),
        ]
    )
    rows = [
        {
            "id": f"q{i:03d}",
            "question": f"Where is thing {i}?",
            "question_concept": "thing",
            "choices": {"label": list("ABCDE"), "text": [f"place {i}{c}" for c in "abcde"]},
            "answerKey": "" if i == 0 else "ABCDE"[i % 5],
        }
        for i in range(n)
    ]
    if edges:
        rows[1]["choices"]["text"][2] = ""
        rows[2].update(question="  Où est – 東京?", choices={"label": list("ABCDE"),
                                                            "text": [" lead", "Ünï ✓", "c", "d", "e"]})
        rows[3]["question"] = ""
        rows[5]["id"] = rows[4]["id"]
    write_parquet(root / "data" / "validation-00000-of-00001.parquet", rows, schema)
    return root


def mathvision(root: Path) -> Path:
    schema = pa.schema(
        [
            ("id", pa.string()),
            ("question", pa.string()),
            ("options", pa.list_(pa.string())),
            ("image", pa.string()),
            ("decoded_image", IMAGE),
            ("answer", pa.string()),
            ("solution", pa.string()),
            ("level", pa.int64()),
            ("subject", pa.string()),
        ]
    )
    rows = []
    for i in range(12):
        kind = i % 4  # 0: real options, 1: letter-only options, 2: free-form answer, 3: two options
        options = {0: ["3", "4", "5", "6", "7"], 1: list("ABCDE"), 2: [], 3: ["yes", "no"]}[kind]
        answer = {0: "B", 1: "C", 2: "12", 3: "A"}[kind]
        rows.append(
            {
                "id": str(i + 1),
                "question": f"<image1>\nHow many squares, case {i}?",
                "options": options,
                "image": f"images/{i + 1}.jpg",
                "decoded_image": hf_image(i, f"images/{i + 1}.jpg"),
                "answer": answer,
                "solution": None,
                "level": 2,
                "subject": "counting",
            }
        )
    write_parquet(root / "data" / "testmini-00000-of-00001-f8ff70fcb2f29b1d.parquet", rows, schema)
    return root


# --------------------------------------------------------------------------- evidence / documents
def hotpot_row(i: int, gold: tuple[int, int] = (7, 2)) -> dict:
    """Ten context paragraphs; the supporting ones are `gold` (by default one inside the first six)."""
    titles = [f"Title {i}-{j}" for j in range(10)]
    first, second = gold
    return {
        "id": f"5a8{i:05d}",
        "question": f"Which hop {i}?",
        "answer": f"answer {i}",
        "type": "bridge",
        "level": "hard",
        "supporting_facts": {"title": [titles[first], titles[second], titles[first]], "sent_id": [0, 1, 1]},
        "context": {
            "title": titles,
            "sentences": [[f"Sentence {j}.0 of {i}.", f" Sentence {j}.1."] for j in range(10)],
        },
    }


GOLD_OUTSIDE_FIRST_SIX = (8, 9)  # row 3 of `hotpotqa`: no supporting paragraph among the first six


def hotpotqa(root: Path, n: int = 12, edges: bool = False) -> Path:
    """`edges`: an empty title, an empty paragraph among the first six, unicode and leading spaces, an empty
    answer, an empty question and a repeated id."""
    schema = pa.schema(
        [
            ("id", pa.string()),
            ("question", pa.string()),
            ("answer", pa.string()),
            ("type", pa.string()),
            ("level", pa.string()),
            (
                "supporting_facts",
                pa.struct([("title", pa.list_(pa.string())), ("sent_id", pa.list_(pa.int32()))]),
            ),
            (
                "context",
                pa.struct([("title", pa.list_(pa.string())), ("sentences", pa.list_(pa.list_(pa.string())))]),
            ),
        ]
    )
    rows = [hotpot_row(i, GOLD_OUTSIDE_FIRST_SIX if i == 3 else (7, 2)) for i in range(n)]
    rows[0]["context"] = {
        "title": rows[0]["context"]["title"][:2],
        "sentences": rows[0]["context"]["sentences"][:2],
    }
    if edges:
        rows[1]["context"]["title"][0] = ""
        rows[1]["context"]["sentences"][2] = []
        rows[2]["context"]["sentences"][1] = ["  Ünïcödé – 東京.", " ✓ second."]
        rows[2]["question"] = " Which 東京?"
        rows[4]["answer"] = ""
        rows[5]["question"] = ""
        rows[7]["id"] = rows[6]["id"]
        rows[8]["supporting_facts"] = {"title": [""], "sent_id": [0]}
        rows[8]["context"]["title"][1] = ""
    write_parquet(root / "distractor" / "validation-00000-of-00001.parquet", rows, schema)
    return root


def musique(root: Path, n: int = 12, edges: bool = False) -> Path:
    """`edges`: a missing title, empty and blank paragraph texts, unicode and leading spaces, an empty
    answer, an empty question and a repeated id (20 paragraphs: more than the cap of 6)."""
    rows = []
    for i in range(n):
        paragraphs = [
            {
                "idx": j,
                "title": f"T{i}.{j}",
                "paragraph_text": f"Paragraph {j} of {i}.",
                "is_supporting": j in (3, 11),
            }
            for j in range(20)
        ]
        rows.append(
            {
                "id": f"2hop__{i}_{i + 1}",
                "paragraphs": paragraphs,
                "question": f"Who {i}?",
                "question_decomposition": [
                    {"id": 1, "question": "a", "answer": "b", "paragraph_support_idx": 3},
                    {"id": 2, "question": "c", "answer": "d", "paragraph_support_idx": 11},
                ],
                "answer": f"Person {i}",
                "answer_aliases": [f"P. {i}"],
                "answerable": i != 5,
            }
        )
    if edges:
        del rows[1]["paragraphs"][3]["title"]
        rows[1]["paragraphs"][0]["paragraph_text"] = ""
        rows[1]["paragraphs"][1]["paragraph_text"] = "   "
        rows[2]["paragraphs"][11]["paragraph_text"] = "  Ünïcödé – 東京 ✓"
        rows[2]["question"] = "  Who 東京?"
        rows[4]["answer"] = ""
        rows[6]["question"] = ""
        rows[8]["id"] = rows[7]["id"]
    write_jsonl(root / "musique_ans_v1.0_dev.jsonl", rows)
    return root


MEDX_CASE = (
    "A 54-year-old man presents with chest pain for two days. He has a history of smoking. "
    "His temperature is 38.1°C and blood pressure is 150/90 mm Hg. Laboratory studies show a serum "
    "troponin level of 2.1 ng/mL. A chest radiograph is shown. He was treated with aspirin. "
    "What is the most likely diagnosis?\nAnswer Choices: (A) Pneumonia (B) Myocardial infarction "
    "(C) Aortic dissection (D) Pericarditis (E) Pulmonary embolism"
)


MEDX_HEADED = (
    "History: A 54-year-old man presents with chest pain for two days. He has a history of smoking.\n"
    "Vital signs: His temperature is 38.1°C and blood pressure is 150/90 mm Hg.\n"
    "Imaging: A chest radiograph is shown.\n"
    "What is the most likely diagnosis?\nAnswer Choices: (A) Pneumonia (B) Myocardial infarction "
    "(C) Aortic dissection (D) Pericarditis (E) Pulmonary embolism"
)
MEDX_EDGES = {  # row: question text (the reference cuts at section headers, else at blank lines)
    1: "A 30-year-old woman is seen in clinic.\nImaging: An MRI of the brain is shown.\nLabs: Serum sodium is "
       "128 mmol/L.\nHistory:  She has headaches – 東京 ✓.\nLabs - Repeat sodium is 130 mmol/L.\nWhich is the "
       "next step?\nAnswer Choices: (A) a (B) b (C) c (D) d (E) e",  # a lead, headers out of order, a repeat
    2: "A 40-year-old man has fever.\n\n  Ünïcödé exam shows a rash – 東京.\n  \nA skin biopsy is shown.\n\n"
       "What is the diagnosis?\nAnswer Choices: (A) a (B) b (C) c (D) d (E) e",  # no header: blank lines
    3: "A child is brought in.\nHistory: Cough for a week.\nExamination: Wheezes are heard.\nWhat is the "
       "cause?\nAnswer Choices: (A) a (B) b (C) c (D) d (E) e",  # two sections and a lead: the first three
    4: "A man is seen.\nHistory: Fever.\nWhat is it?",  # two chunks: too few
    11: "",  # an empty question
    12: "Seen twice.\n\nA nodule is shown.\n\nWhat is it?",  # its first image is not in the archive
    13: "Seen once.\n\nA mass is shown.\n\nWhat is it?",  # none of its images is in the archive
}


def medxpertqa(root: Path, n: int = 8, with_images: bool = True, edges: bool = False) -> Path:
    """`edges`: cases with section headers (the reference cuts there) in and out of order, a lead, a repeated
    header, blank-line paragraphs, too few chunks, an empty question, an empty option, options with unicode and
    spaces, a label "(C)" and "d", a repeated id, an image missing from the archive and a row with none there."""
    rows = []
    for i in range(n):
        question = (
            (MEDX_HEADED if edges else MEDX_CASE)
            if i != 1
            else "What is shown in the image?\nAnswer Choices: (A) a (B) b (C) c (D) d (E) e"
        )
        rows.append(
            {
                "id": f"MM-{i}",
                "question": question,
                "options": {
                    "A": "Pneumonia",
                    "B": "Myocardial infarction",
                    "C": "Aortic dissection",
                    "D": "Pericarditis",
                    "E": "Pulmonary embolism",
                },
                "label": "BCDEA"[i % 5],
                "images": [f"MM-{i}-a.jpeg", f"MM-{i}-b.jpeg"],
                "medical_task": "Diagnosis",
                "body_system": "Cardiovascular",
                "question_type": "Reasoning",
            }
        )
    if edges:
        for i, text in MEDX_EDGES.items():
            rows[i]["question"] = text
        rows[5]["options"]["C"] = ""
        rows[6]["options"].update(A="  Pneumonia", B="Infarto – 東京 ✓ ")
        rows[7]["label"] = "(C)"
        rows[8]["label"] = "d"
        rows[10]["id"] = rows[9]["id"]
        rows[12]["images"][0] = "MM-12-missing.jpeg"
        rows[13]["images"] = ["gone.jpeg"]
    write_jsonl(root / "MM" / "test.jsonl", rows)
    if with_images:
        write_zip(
            root / "images.zip",
            {
                f"images/MM-{i}-{s}.jpeg": image_bytes(10 * i + k, "JPEG")
                for i in range(n)
                for k, s in enumerate("ab")
            },
        )
    return root


def multihop_rag(root: Path, n: int = 12, edges: bool = False) -> Path:
    """`edges`: more evidence than the cap, missing titles (source fallback), an empty fact, an empty
    answer, unicode and leading spaces, a repeated query and an empty query."""
    rows = []
    for i in range(n):
        k = [0, 1, 2, 3, 4, 7][i % 6]  # 0, 1 and 7 evidence items are filtered out
        evidence = [
            {
                "title": f"Article {i}.{j}",
                "author": "A",
                "url": f"https://x/{i}/{j}",
                "source": "News",
                "category": "tech",
                "published_at": "2023-10-01T00:00:00+00:00",
                "fact": f"Fact {j} of {i}.",
            }
            for j in range(k)
        ]
        rows.append(
            {
                "query": f"Did thing {i} happen?",
                "answer": "Yes" if i % 2 else "Insufficient information.",
                "question_type": "inference_query",
                "evidence_list": evidence,
            }
        )
    if edges:
        rows[1]["evidence_list"] = [{**rows[5]["evidence_list"][j], "fact": f"Long {j}."} for j in range(7)] + [
            {"title": "", "source": "Wire", "fact": "Eight."}]  # eight items: the reference keeps the first six
        rows[2]["evidence_list"][0]["title"] = ""  # the source is shown instead
        rows[2]["evidence_list"][1].update(title=None, source=None)  # neither: no title
        rows[3]["evidence_list"][0]["fact"] = ""  # not shown
        rows[3]["answer"] = ""
        rows[4]["evidence_list"][1]["fact"] = "  Ünïcödé – 東京 ✓"
        rows[4]["query"] = "  Did 東京 happen?"
        rows[7]["query"] = rows[8]["query"]
        rows[9]["query"] = ""
    root.mkdir(parents=True, exist_ok=True)
    (root / "MultiHopRAG.json").write_text(json.dumps(rows, ensure_ascii=False), encoding="utf-8")
    (root / "corpus.json").write_text("[]", encoding="utf-8")
    return root


# --------------------------------------------------------------------------- image sets
MANTIS_QUESTIONS = [
    "<image> <image> <image> Which of these animals can fly?",
    "Image 1: <image>\nImage 2: <image>\nImage 3: <image>\nWhich image shows a cat?",
    "<image><image><image><image> What do these pictures have in common?",
    "What is the difference between the first image and the last image? <image> <image> <image>",
]


def mantis_eval(root: Path, n: int = 16) -> Path:
    schema = pa.schema(
        [
            ("id", pa.string()),
            ("question_type", pa.string()),
            ("question", pa.string()),
            ("images", pa.list_(IMAGE)),
            ("options", pa.list_(pa.string())),
            ("answer", pa.string()),
            ("data_source", pa.string()),
            ("category", pa.string()),
        ]
    )
    rows = []
    for i in range(n):
        n_img = [3, 3, 4, 3, 2, 7][i % 6]
        rows.append(
            {
                "id": f"mantis-{i}",
                "question_type": "short-answer" if i % 8 == 7 else "multi-choice",
                "question": MANTIS_QUESTIONS[i % 4],
                "images": [hf_image(100 * i + j) for j in range(n_img)],
                "options": ["(A) a bird", "(B) a fish", "(C) a dog"],
                "answer": "ABC"[i % 3],
                "data_source": "mantis",
                "category": "comparison",
            }
        )
    write_parquet(root / "mantis_eval" / "test-00000-of-00001.parquet", rows, schema)
    return root


MEDFRAME_QUESTIONS = [
    "A patient with abdominal pain had CT imaging. What is the most likely diagnosis?",
    "In the first image, what structure is marked?",
    "Comparing these frames, which finding is on the left of the liver?",
]


def medframeqa(root: Path, n: int = 12) -> Path:
    fields = [
        ("question_id", pa.string()),
        ("system", pa.string()),
        ("organ", pa.string()),
        ("keyword", pa.string()),
        ("modality", pa.string()),
        ("video_id", pa.string()),
        ("question", pa.string()),
        ("options", pa.list_(pa.string())),
        ("image_url", pa.list_(pa.string())),
        ("reasoning_chain", pa.string()),
    ]
    fields += [(f"image_{k}", IMAGE) for k in range(1, 6)] + [("correct_answer", pa.string())]
    rows = []
    for i in range(n):
        n_img = [2, 3, 5, 1][i % 4]
        row = {
            "question_id": f"{i:04d}",
            "system": "Digestive",
            "organ": "liver",
            "keyword": "cirrhosis",
            "modality": "CT",
            "video_id": f"vid{i}",
            "question": MEDFRAME_QUESTIONS[i % 3],
            "options": ["Cirrhosis", "Hepatitis", "Abscess", "Cyst", "Tumor"],
            "image_url": [],
            "reasoning_chain": "...",
            "correct_answer": "ABCDE"[i % 5],
        }
        row |= {f"image_{k}": hf_image(10 * i + k) if k <= n_img else None for k in range(1, 6)}
        rows.append(row)
    write_parquet(root / "data" / "test-00000-of-00001.parquet", rows, pa.schema(fields))
    return root


# --------------------------------------------------------------------------- mixed modality
def mramg(root: Path, n: int = 10, unpacked: bool = False) -> Path:
    docs, images, collection = [], {}, {}
    for d in range(n):
        ids = [1000 + 10 * d + k for k in range(2)]
        content = f"Step one of recipe {d}. <PIC> Step two: stir. <PIC> Serve warm."
        if d == 3:
            content = "A recipe with one marker <PIC> but two images."  # marker/image mismatch: unusable
        docs.append([d, content, ids])
        for img in ids:
            images[f"IMAGE/images/RECIPE/{img}.jpg"] = image_bytes(img, "JPEG")
            collection[str(img)] = {"image_caption": f"photo {img}", "image_path": f"{img}.jpg"}
    images["IMAGE/images/WIKI/1000.jpg"] = image_bytes(1, "JPEG")  # same file name, another sub-dataset
    images["IMAGE/images_info/recipe_imgs_collection.json"] = json.dumps(collection).encode()
    qa = [
        {
            "id": f"recipe_{q}",
            "question": f"How do I make dish {q}?",
            "provenance": [q],
            "ground_truth": f"Follow step one. <PIC> Then stir {q}.",
            "images_list": [1000 + 10 * q],
        }
        for q in range(n)
    ]
    write_jsonl(root / "doc_recipe.jsonl", docs)
    write_jsonl(root / "recipe_mqa.jsonl", qa)
    if unpacked:
        for name, data in images.items():
            (root / "IMAGE" / name).parent.mkdir(parents=True, exist_ok=True)
            (root / "IMAGE" / name).write_bytes(data)
    else:
        write_zip(root / "IMAGE.zip", images)
    return root


def mmdocrag(root: Path, n: int = 10, images_per_row: int = 2) -> Path:
    rows, images = [], {}
    for q in range(n):
        texts = [
            {
                "quote_id": f"text{j + 1}",
                "type": "text",
                "text": f"Text quote {j} of {q}.",
                "page_id": j,
                "layout_id": 2 * j,
            }
            for j in range(3)
        ]
        imgs = [
            {
                "quote_id": f"image{j + 1}",
                "type": "image",
                "img_path": f"images/doc{q}_{j}.jpg",
                "img_description": f"A chart {j}.",
                "page_id": j,
                "layout_id": 2 * j + 1,
            }
            for j in range(images_per_row if q else 0)
        ]
        for im in imgs:
            images[im["img_path"]] = image_bytes(q * 7 + int(im["quote_id"][-1]), "JPEG")
        rows.append(
            {
                "q_id": q,
                "doc_name": f"doc{q}.pdf",
                "domain": "Financial report",
                "question": f"What grew in {q}?",
                "evidence_modality_type": ["text", "image"],
                "question_type": "multimodal",
                "text_quotes": texts,
                "img_quotes": imgs,
                "gold_quotes": ["image1", "text2"],
                "answer_short": f"Revenue {q}",
                "answer_interleaved": "Revenue grew ![image1]",
                "old_id": q,
            }
        )
    write_jsonl(root / "dev_15.jsonl", rows)
    write_zip(root / "images.zip", images)
    return root


def mmqa(root: Path, n: int = 10) -> Path:
    texts = [
        {"title": f"Page {k}", "url": "u", "id": f"t{k}", "text": f"Paragraph {k}."} for k in range(3 * n)
    ]
    images = [{"title": f"Pic {k}", "url": "u", "id": f"i{k}", "path": f"Pic_{k}.jpg"} for k in range(2 * n)]
    questions = []
    for q in range(n):
        modalities = ["text", "table"] if q == 2 else ["image", "text"]
        questions.append(
            {
                "qid": f"{q:032x}",
                "question": f"Which picture shows item {q}?",
                "answers": [
                    {
                        "answer": f"Item {q}",
                        "type": "string",
                        "modality": "image",
                        "text_instances": [],
                        "table_indices": [],
                        "image_instances": [{"doc_id": f"i{2 * q}", "doc_part": "image"}],
                    }
                ],
                "metadata": {
                    "type": "Compose(ImageQ,TextQ)",
                    "modalities": modalities,
                    "image_doc_ids": [f"i{2 * q}", f"i{2 * q + 1}"],
                    "text_doc_ids": [f"t{3 * q}", f"t{3 * q + 1}", f"t{3 * q + 2}"],
                    "table_id": "tab",
                },
                "supporting_context": [
                    {"doc_id": f"i{2 * q}", "doc_part": "image"},
                    {"doc_id": f"t{3 * q + 1}", "doc_part": "text"},
                ],
            }
        )
    write_jsonl(root / "MMQA_dev.jsonl.gz", questions, gz=True)
    write_jsonl(root / "MMQA_texts.jsonl.gz", texts, gz=True)
    write_jsonl(root / "MMQA_images.jsonl.gz", images, gz=True)
    write_zip(
        root / "final_dataset_images.zip",
        {f"final_dataset_images/{im['path']}": image_bytes(k, "JPEG") for k, im in enumerate(images)},
    )
    return root


# --------------------------------------------------------------------------- attack datasets
def scienceqa(root: Path, n: int = 12) -> Path:
    schema = pa.schema(
        [
            ("image", IMAGE),
            ("question", pa.string()),
            ("choices", pa.list_(pa.string())),
            ("answer", pa.int8()),
            ("hint", pa.string()),
            ("task", pa.string()),
            ("grade", pa.string()),
            ("subject", pa.string()),
            ("topic", pa.string()),
            ("category", pa.string()),
            ("skill", pa.string()),
            ("lecture", pa.string()),
            ("solution", pa.string()),
        ]
    )
    rows = [
        {
            "image": hf_image(i, "image.png") if i % 3 else None,
            "question": f"Which is heavier, {i}?",
            "choices": ["a rock", "a feather"],
            "answer": i % 2,
            "hint": "Look at the scale." if i % 2 else "",
            "task": "closed choice",
            "grade": "grade4",
            "subject": "natural science",
            "topic": "physics",
            "category": "weight",
            "skill": "compare",
            "lecture": "lecture",
            "solution": "solution",
        }
        for i in range(n)
    ]
    write_parquet(root / "data" / "test-00000-of-00001-f0e719df791966ff.parquet", rows, schema)
    return root


def aokvqa(root: Path, n: int = 8) -> Path:
    schema = pa.schema(
        [
            ("image", IMAGE),
            ("question_id", pa.string()),
            ("question", pa.string()),
            ("choices", pa.list_(pa.string())),
            ("correct_choice_idx", pa.int8()),
            ("direct_answers", pa.list_(pa.string())),
            ("difficult_direct_answer", pa.bool_()),
            ("rationales", pa.list_(pa.string())),
        ]
    )
    rows = [
        {
            "image": hf_image(i),
            "question_id": f"22jbM6gDxdaMaunuzgrsBB{i}",
            "question": f"What is it {i}?",
            "choices": ["bus", "car", "bike", "boat"],
            "correct_choice_idx": i % 4,
            "direct_answers": ["bus"] * 10,
            "difficult_direct_answer": False,
            "rationales": ["It has wheels."],
        }
        for i in range(n)
    ]
    write_parquet(root / "data" / "validation-00000-of-00001-b2bd0de231b6326a.parquet", rows, schema)
    return root


def aokvqa_release(root: Path, coco: Path, n: int = 4) -> tuple[Path, Path]:
    rows = [
        {
            "split": "val",
            "image_id": 397133 + i,
            "question_id": f"q{i}",
            "question": f"What is it {i}?",
            "choices": ["bus", "car", "bike", "boat"],
            "correct_choice_idx": i % 4,
            "direct_answers": ["bus"],
            "difficult_direct_answer": False,
            "rationales": ["r"],
        }
        for i in range(n)
    ]
    root.mkdir(parents=True, exist_ok=True)
    (root / "aokvqa_v1p0_val.json").write_text(json.dumps(rows), encoding="utf-8")
    (coco / "val2017").mkdir(parents=True, exist_ok=True)
    for i in range(n):
        (coco / "val2017" / f"{397133 + i:012d}.jpg").write_bytes(image_bytes(i, "JPEG"))
    return root, coco


def imagenet_val(root: Path, synsets: list[str], per_synset: int = 6) -> Path:
    for s, wnid in enumerate(synsets):
        (root / wnid).mkdir(parents=True, exist_ok=True)
        for k in range(per_synset):
            (root / wnid / f"ILSVRC2012_val_{s * 100 + k:08d}.JPEG").write_bytes(
                image_bytes(s * 100 + k, "JPEG")
            )
    return root
