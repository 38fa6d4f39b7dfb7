"""dataset=lm_eval: lm-eval's own shipped task YAMLs (arc_easy, commonsense_qa, mmlu_abstract_algebra), on tiny local
copies of their datasets in the upstream schema, give items whose source-order question and options are lm-eval's
own `doc_to_text` / `doc_to_choice` of the same doc (checked against lm-eval's task object built here, beside ours);
`include`, `!function` and `process_docs` go through lm-eval's loader; what cannot be audited is one line."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from facet_probe.core.errors import ConfigError
from facet_probe.core.extras import MissingExtra
from facet_probe.datasets.lm_eval_task import LmEvalTask
from facet_probe.facets.option_order import OptionOrder

#: lm-eval, found without importing it (each test imports it: collection stays light in every worker)
LM_EVAL = importlib.util.find_spec("lm_eval")
pytestmark = pytest.mark.skipif(LM_EVAL is None, reason="needs the [lm_eval] extra ([dev] installs it)")
TASKS = Path(LM_EVAL.submodule_search_locations[0] if LM_EVAL else "no-lm_eval") / "tasks"

#: Each shipped task: its YAML, where its upstream files lie in the hub's layout, the split it audits, two rows.
UPSTREAM = {
    "arc_easy": (TASKS / "arc" / "arc_easy.yaml", "ARC-Easy/test-00000-of-00001.parquet", "test", [
        {"id": "Mercury_1", "question": "Which is a gas?",
         "choices": {"text": ["rock", "steam", "ice", "wood"], "label": ["A", "B", "C", "D"]}, "answerKey": "B"},
        {"id": "Mercury_2", "question": "Which is warm?",
         "choices": {"text": ["sun", "snow", "ice"], "label": ["1", "2", "3"]}, "answerKey": "1"}]),
    "commonsense_qa": (TASKS / "commonsense_qa" / "default.yaml", "data/validation-00000-of-00001.parquet",
                       "validation", [
        {"id": "c1", "question": "Where do fish live? ", "question_concept": "fish",
         "choices": {"label": list("ABCDE"), "text": ["tree", "sea", "desk", "sky", "car"]}, "answerKey": "B"},
        {"id": "c2", "question": "What do you sit on?", "question_concept": "sit",
         "choices": {"label": list("ABCDE"), "text": ["chair", "cloud", "river", "song", "idea"]}, "answerKey": "A"}]),
    "mmlu_abstract_algebra": (TASKS / "mmlu" / "default" / "mmlu_abstract_algebra.yaml",
                              "abstract_algebra/test-00000-of-00001.parquet", "test", [
        {"question": "What is the order of Z_4?", "subject": "abstract_algebra", "choices": ["1", "2", "3", "4"],
         "answer": 3},
        {"question": "Is Z_2 a group?", "subject": "abstract_algebra", "choices": ["yes", "no", "only under x", "never"],
         "answer": 0}]),
}


@pytest.fixture
def upstream(tmp_path, monkeypatch):
    """The three tasks' local copies (one folder each, in the hub's layout), with a private item and datasets cache."""
    monkeypatch.setenv("FACET_PROBE_CACHE", str(tmp_path / "fp-cache"))
    for name, (_, rel, _, rows) in UPSTREAM.items():
        (tmp_path / name / rel).parent.mkdir(parents=True)
        pq.write_table(pa.Table.from_pylist(rows), tmp_path / name / rel)
    return tmp_path


def lm_evals_own_task(name: str, root: Path):
    """lm-eval's task object over the same file, built by lm-eval alone: its YAML loader, its task class."""
    from lm_eval.api.task import ConfigurableTask
    from lm_eval.tasks._yaml_loader import load_yaml

    yaml_path, rel, split, _ = UPSTREAM[name]
    config = {**load_yaml(yaml_path), "dataset_path": "parquet", "dataset_name": None, "test_split": split,
              "validation_split": None, "training_split": None, "fewshot_split": None, "fewshot_config": None,
              "dataset_kwargs": {"data_files": {split: [str(root / name / rel)]},
                                 "cache_dir": str(root / "lm-eval-cache")}}
    return ConfigurableTask(config=config)


def shown_text(item) -> str:
    """The user message of the item's source ordering under option_order."""
    prompt = OptionOrder().render(item, tuple(range(len(item.choices))))
    return "".join(getattr(part, "text", "") for part in prompt.messages[0].parts)


def test_arc_easy_keeps_lm_evals_prompt_as_the_question_and_its_choices_as_the_options(upstream):
    ours = LmEvalTask(task="arc_easy", path=str(upstream / "arc_easy")).load_all()  # by name
    theirs = lm_evals_own_task("arc_easy", upstream)
    for item, doc in zip(ours, theirs.eval_docs, strict=True):
        assert item.question == theirs.doc_to_text(doc) == theirs.fewshot_context(doc=doc, num_fewshot=0)
        assert list(item.choices) == theirs.doc_to_choice(doc)
        assert item.gold_index == theirs.doc_to_target(doc)
        assert shown_text(item).startswith(item.question + "\n" + "\n".join(
            f"{letter}. {text}" for letter, text in zip("ABCD", item.choices, strict=False)))


@pytest.mark.parametrize("name", ["commonsense_qa", "mmlu_abstract_algebra"])
def test_a_prompt_listing_lettered_options_gives_the_question_before_them_and_their_texts(upstream, name):
    yaml_path = str(UPSTREAM[name][0])
    ours = LmEvalTask(task=yaml_path, path=str(upstream / name)).load_all()  # by the YAML's path
    theirs = lm_evals_own_task(name, upstream)
    for item, doc in zip(ours, theirs.eval_docs, strict=True):
        letters, target = theirs.doc_to_choice(doc), theirs.doc_to_target(doc)
        option_lines = "\n".join(f"{letter}. {text}" for letter, text in zip(letters, item.choices, strict=True))
        # lm-eval's zero-shot prompt: the question, its lettered option lines, then the answer cue
        assert theirs.fewshot_context(doc=doc, num_fewshot=0) == f"{item.question}\n{option_lines}\nAnswer:"
        assert item.gold_index == (letters.index(target) if isinstance(target, str) else target)
        # ours: lm-eval's prompt for the source order, its answer cue given way to our answer instruction
        assert shown_text(item).startswith(f"{item.question}\n{option_lines}\n\n")
    assert ours[0].question.startswith(theirs.config.description or "Question: ")


def test_include_function_and_process_docs_go_through_lm_evals_loader(tmp_path, monkeypatch):
    monkeypatch.setenv("FACET_PROBE_CACHE", str(tmp_path / "fp-cache"))
    data = tmp_path / "quiz.jsonl"
    data.write_text('{"q": "which is blue?", "opts": ["grass", "sky"], "gold": 1}\n')
    (tmp_path / "utils.py").write_text(
        "def process_docs(ds):\n    return ds.map(lambda d: {'q': d['q'].capitalize()})\n\n"
        "def options(doc):\n    return [o.upper() for o in doc['opts']]\n")
    (tmp_path / "base.yaml").write_text('output_type: multiple_choice\ntest_split: test\n'
                                        'doc_to_text: "Q: {{q}}\\nA:"\ndoc_to_choice: !function utils.options\n'
                                        'doc_to_target: gold\n')
    (tmp_path / "quiz.yaml").write_text(f"include: base.yaml\ntask: fp_quiz\ndataset_path: json\n"
                                        f"dataset_kwargs:\n  cache_dir: {tmp_path / 'cache'}\n  data_files:\n    test: {data}\n"
                                        "process_docs: !function utils.process_docs\n")
    (item,) = LmEvalTask(task=str(tmp_path / "quiz.yaml")).load_all()
    assert (item.item_id, item.question, item.choices, item.gold_index) == (
        "lm_eval::fp_quiz:0", "Q: Which is blue?\nA:", ("GRASS", "SKY"), 1)


@pytest.mark.parametrize("yaml_path, says", [
    (TASKS / "mmlu" / "default" / "_mmlu.yaml", "is an lm-eval group of tasks; audit one task at a time"),
    (TASKS / "gsm8k" / "gsm8k.yaml", "output_type is 'generate_until'"),
])
def test_what_cannot_be_audited_is_one_line(yaml_path, says):
    with pytest.raises(ConfigError, match=says):
        LmEvalTask(task=str(yaml_path)).load_all()


def test_without_lm_eval_the_line_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "lm_eval.tasks._index", None)
    with pytest.raises(MissingExtra, match=r"dataset=lm_eval needs .*pip install 'facet_probe\[lm_eval\]'"):
        LmEvalTask(task="arc_easy").load_all()
