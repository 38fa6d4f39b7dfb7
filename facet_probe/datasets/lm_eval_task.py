"""lm_eval: an lm-evaluation-harness multiple-choice task as items, rendered by lm-eval itself (`dataset=lm_eval
dataset.task=<name or YAML>`; docs/datasets.md#lm_eval).

Needs the optional `[lm_eval]` extra; nothing else imports lm-eval.

lm-eval itself reads the task: its YAML loader (`include`, `!function`), its task class (`process_docs`, the
dataset, `doc_to_text` / `doc_to_choice` / `doc_to_target` as Jinja or functions) and its zero-shot prompt
(`fewshot_context`: the description, then `doc_to_text`). The options become the orderable components:
- a task whose choices are the answers (ARC: `doc_to_choice: "{{choices.text}}"`) keeps lm-eval's prompt as the
  question and its choices as the options;
- a task whose prompt lists the options and whose choices are their letters (MMLU, CommonsenseQA) has its option
  lines found by rendering the prompt with a marker in place of each option (lm-eval's own rendering): the
  question is the prompt before them, the options are their texts, and what follows them (`Answer:`) gives way to
  facet_probe's answer instruction, as the options give way to the facet's order.
`dataset.path` points the task at a local copy of its data (lm-eval's `dataset_kwargs: {data_files: ...}`).
"""

from __future__ import annotations

import copy
import difflib
from pathlib import Path
from typing import Any, ClassVar

from facet_probe.core.errors import ConfigError
from facet_probe.core.extras import require
from facet_probe.core.items import QUESTION_AS_WRITTEN, AnswerType, Item, choices_problem, make_item
from facet_probe.datasets.base import DatasetLoader, DatasetUnavailable
from facet_probe.datasets.hub import cache_root
from facet_probe.datasets.split_table import file_format, split_files

#: A marker in place of option i while the prompt is rendered (private-use characters: no dataset's text).
MARK = "\ue000{}\ue001"


def lm_eval_module(name: str):
    """A module of lm-eval, or the one line naming the extra to install."""
    return require(name, "lm_eval", "dataset=lm_eval", "lm-evaluation-harness (lm_eval)")


def task_entry(spec: str):
    """lm-eval's index entry of a task YAML (a path) or a task name: the YAML named after it in lm-eval's tasks (most
    are), else lm-eval's index of every task (it reads all of them: seconds)."""
    index = lm_eval_module("lm_eval.tasks._index")
    path = Path(spec).expanduser()
    if path.suffix in (".yaml", ".yml") or path.exists():
        if not path.is_file():
            raise DatasetUnavailable(f"dataset.task={spec}: no such task YAML")
        return index.TaskIndex.entry_from_path(path)
    tasks = Path(lm_eval_module("lm_eval.tasks").__file__).parent
    for candidate in sorted(tasks.rglob(f"{spec}.yaml")):
        entry = index.TaskIndex.entry_from_path(candidate)
        if entry is not None and entry.name == spec:
            return entry
    known = lm_eval_module("lm_eval.tasks").TaskManager().task_index
    if spec not in known:
        close = difflib.get_close_matches(spec, list(known), n=5)
        raise ConfigError(f"dataset.task={spec}: lm-eval has no such task{'; close: ' + ', '.join(close) if close else ''}"
                          " (a task name, or the path to a task YAML)")
    return known[spec]


def check_entry(entry: Any, spec: str) -> dict[str, Any]:
    """The task's raw YAML (includes merged, functions unresolved) when it is one multiple-choice YAML task."""
    kinds = lm_eval_module("lm_eval.tasks._index").Kind
    if entry.kind is kinds.GROUP or entry.kind is kinds.TAG:
        members = sorted(entry.tags) or [t for t in (entry.cfg or {}).get("task", []) if isinstance(t, str)]
        raise ConfigError(f"dataset.task={spec} is an lm-eval {entry.kind.name.lower()} of tasks; audit one task at a "
                          f"time{', e.g. ' + ', '.join(members[:5]) if members else ''}")
    if entry.kind is not kinds.TASK or entry.yaml_path is None:
        raise ConfigError(f"dataset.task={spec} is an lm-eval task written as a Python class; facet_probe reads "
                          "tasks written as YAML")
    raw = lm_eval_module("lm_eval.tasks._yaml_loader").load_yaml(entry.yaml_path, resolve_func=False)
    if raw.get("output_type") != "multiple_choice":
        raise ConfigError(f"dataset.task={spec}: output_type is {raw.get('output_type')!r}; facet_probe orders the "
                          "options of a multiple_choice task")
    return raw


def eval_split(raw: dict[str, Any], split: str | None, spec: str) -> str:
    """The split audited: `split`, else the task's test split, else its validation split (as lm-eval evaluates)."""
    chosen = split or raw.get("test_split") or raw.get("validation_split")
    if not chosen:
        raise ConfigError(f"dataset.task={spec} names no test or validation split; set dataset.split=")
    return str(chosen)


def overrides(raw: dict[str, Any], split: str, local: str | None) -> dict[str, Any]:
    """The task settings facet_probe changes: the audited split as lm-eval's test split (zero-shot: no few-shot
    split), and with a local copy, lm-eval's reader pointed at its files (`dataset_kwargs: {data_files: ...}`)."""
    out: dict[str, Any] = {"test_split": split, "validation_split": None, "training_split": None,
                           "fewshot_split": None, "fewshot_config": None}
    if local is not None:
        files = split_files(local, split, raw.get("dataset_name"))
        out |= {"dataset_path": file_format(files), "dataset_name": None,
                "dataset_kwargs": {"data_files": {split: [str(f) for f in files]},
                                   "cache_dir": str(cache_root() / "hf_datasets")}}
    return out


def options_in_text(task: Any, doc: dict[str, Any], text: str, n: int) -> tuple[list[str], list[str]] | None:
    """(the options, the text around them) when lm-eval's `doc_to_text` lists the values of one of the doc's list
    fields (`choices`, or `choices.text` in a struct) of the task's choice count; None when it lists none. Found by
    rendering the text with a marker in place of each value, and kept only when putting the values back in gives
    lm-eval's text exactly."""
    for path in list_fields(doc, n):
        marked = copy.deepcopy(doc)
        holder = marked if len(path) == 1 else marked[path[0]]
        holder[path[-1]] = [MARK.format(i) for i in range(n)]
        try:
            shown = task.doc_to_text(marked)
        except Exception:  # a template that computes with the values (an index) does not just show them
            continue
        pieces = split_marks(shown, n) if isinstance(shown, str) else None
        values = [str(v) for v in (doc[path[0]] if len(path) == 1 else doc[path[0]][path[1]])]
        if pieces is not None and interleave(pieces, values) == text:
            return values, pieces
    return None


def list_fields(doc: dict[str, Any], n: int) -> list[tuple[str, ...]]:
    """The doc's lists of n texts: top-level fields and fields of a struct field, as paths."""
    def texts(value: Any) -> bool:
        return isinstance(value, list) and len(value) == n and all(isinstance(v, str) for v in value)

    paths: list[tuple[str, ...]] = [(key,) for key, value in doc.items() if texts(value)]
    paths += [(key, sub) for key, value in doc.items() if isinstance(value, dict)
              for sub, inner in value.items() if texts(inner)]
    return paths


def split_marks(shown: str, n: int) -> list[str] | None:
    """The text between the markers 0..n-1 (n + 1 pieces), or None unless each marker is there once, in order."""
    pieces, rest = [], shown
    for i in range(n):
        before, found, rest = rest.partition(MARK.format(i))
        if not found:
            return None
        pieces.append(before)
    pieces.append(rest)
    return pieces if "\ue000" not in "".join(pieces) else None


def interleave(pieces: list[str], values: list[str]) -> str:
    """pieces[0] + values[0] + pieces[1] + ... + pieces[n]: the prompt with the options in this order."""
    return "".join(p + v for p, v in zip(pieces, values, strict=False)) + pieces[-1]


def layout_problem(pieces: list[str], labels: list[str]) -> str | None:
    """Why the options are not one per line under the question, each line showing its letter; None when they are."""
    stem, _, first_line = pieces[0].rpartition("\n")
    if not stem.strip():
        return "the prompt shows the options on the question's own line"
    lines = [first_line] + [p.rpartition("\n")[2] for p in pieces[1:-1]]
    if any("\n" not in p for p in pieces[1:-1]) or not all(label.strip() in line for label, line in
                                                            zip(labels, lines, strict=True)):
        return "the prompt does not show one option per line, each after its letter"
    return None


def target_index(target: Any, labels: list[str]) -> int | None:
    """lm-eval's target as an index into its choices (an index already, or one of the choices)."""
    if isinstance(target, int) and not isinstance(target, bool):
        return target if 0 <= target < len(labels) else None
    return labels.index(target) if isinstance(target, str) and target in labels else None


def single_letters(labels: list[str]) -> bool:
    """Whether the choices are bare letters (A, B, ...): labels of options shown elsewhere, not options."""
    return all(len(str(label).strip()) == 1 for label in labels)


def doc_item(task: Any, doc: dict[str, Any], index: int, dataset: str) -> Item | str:
    """One doc as an item (the reason it cannot be one otherwise), from lm-eval's own rendering of it."""
    prompt = task.fewshot_context(doc=doc, num_fewshot=0)  # lm-eval's zero-shot prompt: description + doc_to_text
    text = task.doc_to_text(doc)
    labels = [str(c) for c in task.doc_to_choice(doc)]
    gold = target_index(task.doc_to_target(doc), labels)
    if gold is None:
        return "lm-eval's target is not one of its choices"
    found = options_in_text(task, doc, text, len(labels))
    if found is None:
        if single_letters(labels):
            return "the choices are letters and the prompt lists no field of the doc as its options"
        question, choices = prompt, labels
    else:
        choices, pieces = found
        if problem := layout_problem(pieces, labels):
            return problem
        if not prompt.endswith(text):
            return "lm-eval's prompt does not end with its doc_to_text"
        question = prompt[:len(prompt) - len(text)] + pieces[0].rpartition("\n")[0]  # before the first option's line
    if problem := choices_problem(choices):
        return problem
    return make_item(item_id=f"{dataset}::{task.config.task}:{index}", dataset=dataset, question=question,
                     choices=tuple(choices), gold_index=gold, answer_type=AnswerType.MCQ,
                     metadata={QUESTION_AS_WRITTEN: True, "lm_eval_task": task.config.task, "lm_eval_doc": index,
                               "lm_eval_prompt": prompt, "lm_eval_choices": labels})


class LmEvalTask(DatasetLoader):
    """The docs of an lm-eval multiple-choice task's test (else validation) split, rendered by lm-eval."""

    facets: ClassVar[tuple[str, ...]] = ("option_order",)
    source: ClassVar[str] = "an lm-evaluation-harness task (its YAML and its dataset)"
    license: ClassVar[str] = "that of the task's dataset"

    def __init__(self, name: str = "lm_eval", task: str | None = None, path: str | None = None,
                 split: str | None = None, **rest) -> None:
        super().__init__(name, path, **rest)
        if not task:
            raise ConfigError(f"dataset {name}: name the task, e.g. dataset={name} dataset.task=arc_easy (an lm-eval "
                              "task name, or the path to a task YAML)")
        self.task, self.split, self.local = str(task), split, str(path) if path else None

    def build_task(self) -> Any:
        """lm-eval's task object, over the local copy when one is given (else the task's dataset, from the datasets
        cache)."""
        entry = task_entry(self.task)
        raw = check_entry(entry, self.task)
        split = eval_split(raw, self.split, self.task)
        factory = lm_eval_module("lm_eval.tasks._factory").TaskFactory()
        try:
            task = factory.build(entry, overrides=overrides(raw, split, self.local), registry={})
        except (ConnectionError, FileNotFoundError) as exc:
            raise DatasetUnavailable(f"dataset.task={self.task}: its dataset {raw.get('dataset_path')} "
                                     f"({raw.get('dataset_name') or 'default'}) could not be read ({type(exc).__name__}: "
                                     f"{str(exc).splitlines()[0] if str(exc) else ''}); give a local copy: "
                                     "dataset.path=<folder or file>") from None
        if task.multiple_input or task.multiple_target:
            raise ConfigError(f"dataset.task={self.task}: a task with several {'inputs' if task.multiple_input else 'targets'}"
                              " per doc; facet_probe orders the options of one question with one answer")
        return task

    def load_all(self) -> list[Item]:
        task = self.build_task()
        self._skipped.clear()
        items = []
        for index, doc in enumerate(task.eval_docs):
            made = doc_item(task, doc, index, self.name)
            if isinstance(made, str):
                self.skip(made)
            else:
                items.append(made)
        if not items:
            raise ConfigError(f"dataset.task={self.task}: no doc makes an item ({self.skipped or 'the split is empty'})")
        return items
