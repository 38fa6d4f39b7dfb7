"""The trial record: one stored model call, the unit of storage, resume and analysis.

A superset of the FACET-PROBE v0.0.1 trial JSONL (facet, dataset, model, item_id, ordering_idx,
permutation, answer_normalized, gold_normalized, correct, score_kind, prompt_hash, raw_output), so
metrics read either. `answer_normalized` is the answer's *meaning*, comparable across orderings:
for MCQ the source-order letter of the chosen option (A = first option in the dataset's order),
for free-form answers the normalised text, for tool items the function name; unparseable answers
are the literal `PARSE_ERROR` with `parse_status="parse_error"`.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field, fields, is_dataclass
from typing import Any

PARSE_ERROR = "<parse_error>"

#: The trial-key scheme written now. 1: without the model name (two model configs with the same
#: fingerprint shared keys); 2: with it. Records of older schemes are re-keyed on resume, never re-called.
KEY_VERSION = 2

#: The version of parsing + normalisation + scoring a stored trial was scored with. Bump it with any change
#: that can read a reply differently: reports re-score older trials from their `raw_output` (no call).
#: 1: before the version was recorded; 2: the reference's free-text stripping and the wider letter ladder;
#: 3: a LaTeX label in the instructed span, "My answer: B" / "Choice: B", "It is B.", a lone lower-case label.
SCORER_VERSION = 3

#: Columns of the FACET-PROBE v0.0.1 trial JSONL (all present in every record here).
REFERENCE_COLUMNS = ("facet", "dataset", "model", "item_id", "ordering_idx", "permutation",
                     "answer_normalized", "gold_normalized", "correct", "score_kind", "prompt_hash",
                     "raw_output")


@dataclass
class Trial:
    # identity: which manifest row, which model, which call
    trial_key: str  # identity of this manifest row x repeat x model settings (unit of resume)
    call_key: str  # identity of the call (settings + prompt + repeat): identical calls may share a response
    model: str
    facet: str
    dataset: str
    item_id: str
    ordering_idx: int
    repeat_idx: int
    permutation: list[int]
    component_ids: list[str]
    prompt_hash: str
    mode: str  # direct | cot
    # output
    raw_output: str
    instruction: str | None = None  # the prompt mitigation's text added to the system text (prompt.mitigation)
    stated_stability: float | None = None  # the reply's stated order stability (prompt.calibration), in [0, 1]
    n_options: int | None = None  # number of answer options (MCQ), for the OSI normaliser
    thinking: str | None = None
    answer_raw: str | None = None  # what the parser extracted, as displayed (e.g. letter "C")
    answer_normalized: str = PARSE_ERROR
    gold_normalized: str = ""
    correct: bool | None = None
    score_kind: str = ""
    parse_status: str = "parse_error"  # ok | fallback | parse_error
    scorer_version: int | None = None  # `SCORER_VERSION` the fields above were scored with
    error: str | None = None  # set when the call failed for good; such trials are retried on resume
    # the manifest this trial answers (seed, K) and the key scheme of `trial_key`
    seed: int | None = None
    k: int | None = None
    key_version: int = KEY_VERSION
    migrated_from: str | None = None  # the older-scheme key this record re-keys (no call was made)
    # provenance
    model_fingerprint: str = ""
    latency_s: float = 0.0
    usage: dict[str, int] = field(default_factory=dict)
    provenance: dict[str, Any] = field(default_factory=dict)
    created_at: str = ""

    def to_json(self) -> str:
        """The stored line: the fields as JSON, keys sorted. Serialised from the fields as they are (a dataclass
        inside one as its fields): `asdict` copies every nested value first, 6x the time of the whole dump."""
        return json.dumps(vars(self), ensure_ascii=False, sort_keys=True, default=_nested_dataclass)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Trial:
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


def _nested_dataclass(value: Any) -> dict[str, Any]:
    """A dataclass inside a trial's field (in its provenance) as `asdict` would store it; anything else JSON cannot
    hold stays an error."""
    if is_dataclass(value) and not isinstance(value, type):
        return asdict(value)
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def fingerprint_hash(fingerprint: dict[str, Any]) -> str:
    """Stable 16-hex hash of a runner fingerprint (model id, revision, every generation setting)."""
    canon = json.dumps(fingerprint, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(canon.encode()).hexdigest()[:16]


def call_key(model_fingerprint: str, prompt_hash: str, repeat_idx: int, occurrence: int = 0) -> str:
    """Content address of one call: same model settings + same prompt + same repeat (+ same occurrence)
    = same answer.

    `occurrence` j >= 1 is the j-th re-ask of an ordering already in the item's K rows (n! < K): its own
    call, as the paper asked. Occurrence 0 is the key every store has always held for that call, and
    sharing (`share_repeated_orderings`) gives every occurrence that key, so the repeats reuse the first.
    """
    raw = f"{model_fingerprint}\x1f{prompt_hash}\x1f{repeat_idx}"
    if occurrence:
        raw += f"\x1foccurrence={int(occurrence)}"
    return hashlib.sha256(raw.encode()).hexdigest()[:24]


#: A trial key hashes its fields' text joined by this separator (`trial_key`; `scoring.run_trials` checks stored
#: keys a whole column at a time with the same two).
KEY_SEP = "\x1f"


def key_digest(raw: bytes) -> str:
    """A trial key from its fields' joined text."""
    return hashlib.sha256(raw).hexdigest()[:24]


def trial_key(call: str, model: str, facet: str, item_id: str, ordering_idx: int, seed: int, k: int) -> str:
    """Identity of one trial: the call, the configured model name (two configs with one fingerprint are
    two models) and the manifest row it answers (so a new seed or K is new)."""
    return key_digest(KEY_SEP.join(map(str, (call, model, facet, item_id, ordering_idx, seed, k))).encode())


def trial_key_v1(call: str, facet: str, item_id: str, ordering_idx: int, seed: int, k: int) -> str:
    """The key scheme-1 stores hold (no model name); read to re-key them, never written."""
    return key_digest(KEY_SEP.join(map(str, (call, facet, item_id, ordering_idx, seed, k))).encode())


def trial_keys_of(call: str, model: str, facet: str, item_id: str, ordering_idx: int, seed: int,
                  k: int) -> dict[str, int]:
    """Every key a stored record of this trial may carry, by scheme: {key: key_version} (the row's part of both
    keys formatted once: a panel computes these for every model x manifest row)."""
    row = KEY_SEP.join(map(str, (facet, item_id, ordering_idx, seed, k)))
    return {key_digest(KEY_SEP.join((call, model, row)).encode()): KEY_VERSION,  # trial_key
            key_digest(KEY_SEP.join((call, row)).encode()): 1}  # trial_key_v1
