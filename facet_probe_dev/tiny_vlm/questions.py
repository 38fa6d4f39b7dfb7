"""Every question a synthetic train item's evidence answers, with its gold answer and a rationale.

A synthetic item asks one question about its evidence (the people in the documents, the shapes in
the picture...), but the same evidence answers the same question about each of the other entities
too: "What is Ana's job?" and "What is Ben's job?" over the same documents. `questions(item)` lists
all of them, in the generator's own wording (imported from the generator modules where it is a
constant there), each with its gold answer and a one- or two-sentence rationale that states the
supporting evidence. `sibling(item, qa)` is the item with that question instead (same components,
same options): an item the generator could have drawn itself.

The training builder uses the siblings to train on several questions per rendered context (the shared
prompt prefix is computed once, see `data.py`). The item's own question is always in the list and
defines its chain-of-thought rationale. If a generator changes so that an item's own question is not
recognised, the list falls back to that question alone (with a generic rationale) and
`recognised(item)` is False; the tests check that every set is recognised.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from facet_probe.core.items import AnswerType, ComponentKind, Item, make_item
from facet_probe.datasets.synthetic import docs, evidence, few_shot, tools
from facet_probe.datasets.synthetic.dialog import TURN_TEMPLATES
from facet_probe.datasets.synthetic.vocab import CATEGORIES
from facet_probe_dev.tiny_vlm import echo, same_colour


@dataclass(frozen=True)
class QA:
    question: str
    gold: str
    rationale: str


try:  # the generators' own article rule, when the vocabulary module has one
    from facet_probe.datasets.synthetic.vocab import a
except ImportError:  # pragma: no cover
    def a(word: str) -> str:
        """The word with its indefinite article."""
        return f"an {word}" if word[:1].lower() in "aeiou" else f"a {word}"


def _template_regex(template: str) -> re.Pattern[str]:
    """'{s} lives in {v}.' -> a regex with named groups s and v (one word each)."""
    pattern = re.escape(template)
    for name in ("s", "v", "o", "c", "x"):
        pattern = pattern.replace(re.escape("{" + name + "}"), f"(?P<{name}>[\\w']+)")
    return re.compile(f"^{pattern}$")


def _shape_fact(colour: str, shape: str, where: str) -> str:
    return f"{where} shows {a(colour + ' ' + shape)}."


def _lookup_qas(objects: list[dict[str, str]], choices: tuple[str, ...], where: str) -> list[QA]:
    """Colour-of-shape and shape-of-colour questions whose gold is among the options."""
    out = []
    for o in objects:
        fact = _shape_fact(o["colour"], o["shape"], where)
        if o["colour"] in choices:
            out.append(QA(f"What colour is the {o['shape']}?", o["colour"], fact))
        if o["shape"] in choices:
            out.append(QA(f"Which shape is {o['colour']}?", o["shape"], fact))
    return out


def _visual_mcq(item: Item) -> list[QA]:
    return _lookup_qas(list(item.fixed[0].metadata["scene"]), item.choices, "The figure")


def _image_set(item: Item) -> list[QA]:
    objects = [c.metadata for c in item.components if c.kind == ComponentKind.IMAGE]
    return _lookup_qas(objects, item.choices, "One image")


def _mixed(item: Item) -> list[QA]:
    out = []
    for c in item.components:
        m = c.metadata
        fact = c.text.strip() if c.kind != ComponentKind.IMAGE else _shape_fact(m["colour"], m["shape"], "An image")
        out.append(QA(f"What colour is the {m['shape']}?", m["colour"], fact))
        out.append(QA(f"Which shape is {m['colour']}?", m["shape"], fact))
    return out


_POSSESSION = re.compile(r"(\w+) has an? (\w+)\.")


def _mcq(item: Item) -> list[QA]:
    if item.question.startswith("Which one is "):
        out = []
        for category, words in sorted(CATEGORIES.items()):
            members = [c for c in item.choices if c in words]
            if len(members) == 1:
                out.append(QA(f"Which one is {a(category)}?", members[0],
                              f"{a(members[0]).capitalize()} is {a(category)}."))
        return out
    story, _, _ = item.question.partition(" What does ")
    return [QA(f"{story} What does {who} have?", obj, f"{who} has {a(obj)}.")
            for who, obj in _POSSESSION.findall(story) if obj in item.choices]


def _docs(item: Item) -> list[QA]:
    out = []
    for c in item.components_of(ComponentKind.DOCUMENT):
        name = (c.title or "").strip()
        sentences = [s.strip() + "." for s in c.text.split(".") if s.strip()]
        job = re.search(r"works as an? (\w+)\.", c.text)
        city = re.search(r"is from (\w+)\.", c.text)
        for field, match in (("job", job), ("city", city)):
            if match:
                value = match.group(1)
                out.append(QA(docs.QUESTIONS[field].format(s=name), value,
                              next(s for s in sentences if value in s)))
    return out


def _evidence(item: Item) -> list[QA]:
    facts = []  # (subject, relation, value, text)
    patterns = {rel: _template_regex(spec[0]) for rel, spec in evidence.RELATIONS.items()}
    patterns["friend"] = _template_regex(evidence.FRIEND)
    for c in item.components_of(ComponentKind.TEXT_CHUNK):
        text = c.text.strip()
        for rel, pat in patterns.items():
            m = pat.match(text)
            if m:
                facts.append((m["s"], rel, m["v"], text))
                break
    out = [QA(evidence.RELATIONS[rel][1].format(s=s), v, text) for s, rel, v, text in facts if rel != "friend"]
    for s, rel, friend, friend_text in facts:
        if rel != "friend":
            continue
        for s2, rel2, v2, text2 in facts:
            if s2 == friend and rel2 != "friend":
                out.append(QA(evidence.RELATIONS[rel2][2].format(s=s), v2, f"{friend_text} {text2}"))
    return out


def _dialog(item: Item) -> list[QA]:
    pats = [_template_regex(t) for t in TURN_TEMPLATES.values()]
    out = []
    for c in item.components_of(ComponentKind.DIALOG_TURN):
        for pat in pats:
            m = pat.match(c.text.strip())
            if m:
                out.append(QA(f"Where is the {m['o']}?", m["c"], f"The {m['o']} is in the {m['c']}."))
                break
    return out


def _few_shot(item: Item) -> list[QA]:
    pat = _template_regex(few_shot.QUESTION.replace("{w}", "{x}"))
    demos = []  # (word, code)
    for c in item.components_of(ComponentKind.FEW_SHOT):
        m = pat.match(c.text.strip())
        if m:
            demos.append((m["x"], (c.answer or "").strip()))
    shown = {w for w, _ in demos}
    out = []
    for category, words in sorted(CATEGORIES.items()):
        in_cat = [(w, code) for w, code in demos if w in words]
        if not in_cat or len({code for _, code in in_cat}) != 1:
            continue
        example, code = in_cat[0]
        for word in words:
            if word not in shown:
                out.append(QA(few_shot.QUESTION.format(w=word), code,
                              f"The {word} is {a(category)}, like the {example}."))
    return out


def _tools(item: Item) -> list[QA]:
    by_description = {cap.description: cap for cap in tools.CAPABILITIES.values()}
    out = []
    for c in item.components_of(ComponentKind.TOOL):
        cap = by_description.get(c.text.strip())
        if cap is None:
            continue
        name = (c.title or "").strip()
        text = c.text.strip()
        reason = f"The {name} tool {text[:1].lower()}{text[1:]}"
        out += [QA(cap.request.format(x=x), name, reason) for x in cap.slot]
    return out


def _echo(item: Item) -> list[QA]:
    return [QA(echo.QUESTION.format(w=c), c, echo.RATIONALE.format(w=c)) for c in item.choices]


def _same_colour(item: Item) -> list[QA]:
    scene = list(item.fixed[0].metadata["scene"])
    return [QA(same_colour.QUESTION.format(s=o["shape"]), same_colour.partner(scene, o["shape"])["shape"],
               same_colour.rationale(scene, o["shape"]))
            for o in scene if same_colour.partner(scene, o["shape"])["shape"] in item.choices]


def _same_colour_owner(item: Item) -> list[QA]:
    scene, held = list(item.fixed[0].metadata["scene"]), item.metadata["owners"]
    return [QA(same_colour.owner_question(held, who), same_colour.partner(scene, shape)["shape"],
               f"{who} has the {shape}. {same_colour.rationale(scene, shape)}") for who, shape in held.items()]


ENUMERATORS: dict[str, Callable[[Item], list[QA]]] = {
    echo.NAME: _echo,
    same_colour.NAME: _same_colour,
    same_colour.OWNER_NAME: _same_colour_owner,
    "synthetic_mcq": _mcq,
    "synthetic_visual_mcq": _visual_mcq,
    "synthetic_evidence": _evidence,
    "synthetic_docs": _docs,
    "synthetic_image_set": _image_set,
    "synthetic_mixed": _mixed,
    "synthetic_dialog": _dialog,
    "synthetic_few_shot": _few_shot,
    "synthetic_tools": _tools,
}


def _enumerate(item: Item) -> list[QA]:
    fn = ENUMERATORS.get(item.dataset)
    if fn is None:
        return []
    try:
        return fn(item)
    except (KeyError, IndexError, AttributeError, StopIteration, ValueError):
        return []


def recognised(item: Item) -> bool:
    """Is the item's own question (with its gold) among the enumerated ones?"""
    return any(q.question == item.question and q.gold == item.gold for q in _enumerate(item))


def questions(item: Item) -> list[QA]:
    """All questions the item's evidence answers (its own first); just its own if unrecognised."""
    found = _enumerate(item)
    own = next((q for q in found if q.question == item.question and q.gold == item.gold), None)
    if own is None:
        return [QA(item.question, item.gold, f"The evidence points to {item.gold}.")]
    seen = {(own.question, own.gold)}
    rest = []
    for q in found:
        if (q.question, q.gold) not in seen:
            seen.add((q.question, q.gold))
            rest.append(q)
    return [own, *rest]


def rationale(item: Item) -> str:
    """The chain-of-thought rationale of the item's own question."""
    return questions(item)[0].rationale


def sibling(item: Item, qa: QA) -> Item:
    """The item asking `qa.question` (same components, same options, same metadata)."""
    if qa.question == item.question:
        return item
    fields = {"item_id": item.item_id, "dataset": item.dataset, "question": qa.question,
              "components": item.components, "fixed": item.fixed, "choices": item.choices,
              "answer_aliases": (), "answer_type": item.answer_type,
              "metadata": {**item.metadata, "sibling_of": item.item_id}}
    if item.answer_type == AnswerType.MCQ:
        fields["gold_index"] = item.choices.index(qa.gold)
    else:
        fields["gold_answer"] = qa.gold
    return make_item(**fields)


__all__ = ["QA", "a", "questions", "rationale", "recognised", "sibling"]
