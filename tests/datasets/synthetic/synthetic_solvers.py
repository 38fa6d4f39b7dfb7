"""Reference solvers for the synthetic sets: each reads an item's question and its components *as an
unordered set* (text parsed from the rendered sentences; pictures through their metadata, which the
image tests check against the pixels) and returns every answer the evidence supports.

A valid item has exactly one such answer and it equals the gold; solving a shuffled copy of the
components gives the same answer, which is what "answerable regardless of order" means.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

from facet_probe.core.items import Component, ComponentKind, Item
from facet_probe.datasets.synthetic.tools import CAPABILITIES
from facet_probe.datasets.synthetic.vocab import CATEGORIES

Facts = dict[tuple[str, str], set[str]]  # (subject, relation) -> values


def _facts(sentences: Iterable[str], patterns: dict[str, str]) -> Facts:
    facts: Facts = {}
    for sentence in sentences:
        hits = [(rel, m) for rel, pat in patterns.items() if (m := re.fullmatch(pat, sentence))]
        assert len(hits) == 1, f"sentence {sentence!r} matches {len(hits)} templates"
        rel, m = hits[0]
        facts.setdefault((m.group(1), rel), set()).add(m.group(2))
    return facts


def _ask(question: str, patterns: dict[str, str]) -> tuple[str, str]:
    for rel, pat in patterns.items():
        if m := re.fullmatch(pat, question):
            return rel, m.group(1)
    raise AssertionError(f"question {question!r} matches no template")


def _shape_colour_lookup(question: str, objects: list[dict[str, str]]) -> set[str]:
    if m := re.fullmatch(r"What colour is the (\w+)\?", question):
        return {o["colour"] for o in objects if o["shape"] == m.group(1)}
    if m := re.fullmatch(r"Which shape is (\w+)\?", question):
        return {o["shape"] for o in objects if o["colour"] == m.group(1)}
    raise AssertionError(f"question {question!r} matches no template")


def solve_mcq(item: Item, comps: list[Component]) -> set[str]:
    if m := re.fullmatch(r"Which one is an? (\w+)\?", item.question):
        return {c for c in item.choices if c in CATEGORIES[m.group(1)]}
    *story, ask = re.split(r"(?<=[.?]) ", item.question)
    facts = _facts(story, {"has": r"(\w+) has an? (\w+)\."})
    person = re.fullmatch(r"What does (\w+) have\?", ask).group(1)
    return facts.get((person, "has"), set()) & set(item.choices)


def solve_visual_mcq(item: Item, comps: list[Component]) -> set[str]:
    return _shape_colour_lookup(item.question, item.fixed[0].metadata["scene"]) & set(item.choices)


def solve_image_set(item: Item, comps: list[Component]) -> set[str]:
    return _shape_colour_lookup(item.question, [c.metadata for c in comps]) & set(item.choices)


EVIDENCE_FACTS = {"city": r"(\w+) lives in (\w+)\.", "pet": r"(\w+) has a pet (\w+)\.",
                  "fruit": r"(\w+)'s favourite fruit is the (\w+)\.", "friend": r"(\w+)'s best friend is (\w+)\."}
EVIDENCE_ONE_HOP = {"city": r"Which city does (\w+) live in\?", "pet": r"Which pet does (\w+) have\?",
                    "fruit": r"What is (\w+)'s favourite fruit\?"}
EVIDENCE_TWO_HOP = {"city": r"Which city does the best friend of (\w+) live in\?",
                    "pet": r"Which pet does the best friend of (\w+) have\?",
                    "fruit": r"What is the favourite fruit of the best friend of (\w+)\?"}


def solve_evidence(item: Item, comps: list[Component]) -> set[str]:
    facts = _facts([c.text for c in comps], EVIDENCE_FACTS)
    if any(re.fullmatch(p, item.question) for p in EVIDENCE_TWO_HOP.values()):
        rel, person = _ask(item.question, EVIDENCE_TWO_HOP)
        friends = facts.get((person, "friend"), set())
        return {v for f in friends for v in facts.get((f, rel), set())}
    rel, person = _ask(item.question, EVIDENCE_ONE_HOP)
    return facts.get((person, rel), set())


def solve_docs(item: Item, comps: list[Component]) -> set[str]:
    facts: Facts = {}
    for c in comps:
        m = re.fullmatch(r"(\w+) works as an? (\w+)\. (\w+) is from (\w+)\.", c.text)
        assert m and m.group(1) == m.group(3) == c.title, f"document {c.id} is not about its title"
        facts.setdefault((c.title, "job"), set()).add(m.group(2))
        facts.setdefault((c.title, "city"), set()).add(m.group(4))
    rel, person = _ask(item.question, {"job": r"What is (\w+)'s job\?", "city": r"Which city is (\w+) from\?"})
    return facts.get((person, rel), set())


def solve_mixed(item: Item, comps: list[Component]) -> set[str]:
    objects = []
    for c in comps:
        if c.kind == ComponentKind.IMAGE:
            objects.append(c.metadata)
        else:
            m = re.fullmatch(r"The (\w+) is (\w+)\.", c.text)
            objects.append({"shape": m.group(1), "colour": m.group(2)})
    return _shape_colour_lookup(item.question, objects)


def solve_dialog(item: Item, comps: list[Component]) -> set[str]:
    facts = _facts([c.text for c in comps], {"user": r"I put the (\w+) in the (\w+)\.",
                                            "assistant": r"The (\w+) is in the (\w+)\."})
    obj = re.fullmatch(r"Where is the (\w+)\?", item.question).group(1)
    return facts.get((obj, "user"), set()) | facts.get((obj, "assistant"), set())


def category_of(word: str) -> str:
    (cat,) = [c for c, words in CATEGORIES.items() if word in words]
    return cat


def solve_few_shot(item: Item, comps: list[Component]) -> set[str]:
    pattern = r"What is the code word for (\w+)\?"
    query = category_of(re.fullmatch(pattern, item.question).group(1))
    return {c.answer for c in comps if category_of(re.fullmatch(pattern, c.text).group(1)) == query}


def solve_tools(item: Item, comps: list[Component]) -> set[str]:
    wanted = [cap.description for cap in CAPABILITIES.values()
              if re.fullmatch(re.escape(cap.request).replace(r"\{x\}", r"\w+"), item.question)]
    assert len(wanted) == 1, f"request {item.question!r} matches {len(wanted)} capabilities"
    return {c.title for c in comps if c.text == wanted[0]}


SOLVERS: dict[str, Callable[[Item, list[Component]], set[str]]] = {
    "synthetic_mcq": solve_mcq, "synthetic_visual_mcq": solve_visual_mcq, "synthetic_evidence": solve_evidence,
    "synthetic_docs": solve_docs, "synthetic_image_set": solve_image_set, "synthetic_mixed": solve_mixed,
    "synthetic_dialog": solve_dialog, "synthetic_few_shot": solve_few_shot, "synthetic_tools": solve_tools,
}
