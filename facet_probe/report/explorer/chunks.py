"""The page's data split so it scales: an index the page parses at load (runs, the item list with each model's
flip status, the recovery counts, attack samples) and chunks of items' details (every trial, the prompts and
images they show) that the page reads only when one of their items opens.

A chunk is about `CHUNK_BYTES` of JSON text holding whole items in list order, with the prompts and images its
items show (an image shared by items of two chunks is in both). The token names this build's chunks: a hash of
their text, so a chunk file of another build is never read for this page's (see `page`).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

#: A chunk's target size in bytes of JSON text (an item larger than this is a chunk of its own).
CHUNK_BYTES = 1_000_000


def dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


@dataclass(frozen=True)
class Split:
    """The page's index and its chunks' JSON texts (chunk i holds the items whose index entry has `ch` = i)."""

    index: dict
    chunks: list[str]
    token: str


def _images_of(prompt: dict) -> list[str]:
    return [part["img"] for _, parts in prompt.get("m", ()) for part in parts if isinstance(part, dict)]


def split(blob: dict, chunk_bytes: int | None = None) -> Split:
    """`blob` (`data.Blob.to_json`: items with their trials) -> the index and its chunks of about `chunk_bytes`
    (default `CHUNK_BYTES`)."""
    chunk_bytes = CHUNK_BYTES if chunk_bytes is None else chunk_bytes
    prompts, images = blob["prompts"], blob["images"]
    prompt_text: dict[str, str] = {}
    run_names: dict[str, int] = {}
    chunks: list[str] = []
    pending: list[tuple[str, str]] = []  # (item key, its details' JSON text)
    hashes: dict[str, None] = {}  # the pending items' prompts, in order of first use
    size = 0

    def flush() -> None:
        nonlocal size
        shown = {h: prompts[h] for h in hashes}
        pictures = {d: images[d] for p in shown.values() for d in _images_of(p) if d in images}
        body = ",".join(f"{dumps(key)}:{text}" for key, text in pending)
        chunks.append(f'{{"items":{{{body}}},"prompts":{dumps(shown)},"images":{dumps(pictures)}}}')
        pending.clear()
        hashes.clear()
        size = 0

    items, n_trials = [], 0
    for item in blob["items"]:
        cells, details = {}, {}
        for model, cell in item["models"].items():
            cells[model] = {k: v for k, v in cell.items() if k != "trials"}
            cells[model]["run"] = run_names.setdefault(cell.get("run"), len(run_names))
            details[model] = cell["trials"]
            n_trials += len(cell["trials"])
        text = dumps(details)
        own = [t["h"] for trials in details.values() for t in trials if t.get("h") in prompts]
        extra = sum(len(prompt_text.setdefault(h, dumps(prompts[h]))) for h in dict.fromkeys(own) if h not in hashes)
        if pending and size + len(text) + extra > chunk_bytes:
            flush()
            extra = sum(len(prompt_text[h]) for h in dict.fromkeys(own))
        pending.append((item["key"], text))
        hashes.update(dict.fromkeys(own))
        size += len(text) + extra
        items.append({**item, "models": cells, "ch": len(chunks)})
    if pending:
        flush()
    token = hashlib.sha256("\n".join(chunks).encode()).hexdigest()[:12]
    index = {k: v for k, v in blob.items() if k not in ("items", "prompts", "images")}
    index |= {"items": items, "run_names": list(run_names), "n_trials": n_trials}
    return Split(index, chunks, token)


def merge(index: dict, chunks: list[dict]) -> dict:
    """The blob back from an index and its parsed chunks (`split`'s inverse; for tests and tools)."""
    names = index.get("run_names", [])
    prompts: dict[str, dict] = {}
    images: dict[str, str] = {}
    for chunk in chunks:
        prompts |= chunk["prompts"]
        images |= chunk["images"]
    items = []
    for item in index["items"]:
        details = chunks[item["ch"]]["items"][item["key"]]
        models = {m: {**cell, "run": names[cell["run"]], "trials": details[m]} for m, cell in item["models"].items()}
        items.append({k: v for k, v in item.items() if k != "ch"} | {"models": models})
    blob = {k: v for k, v in index.items() if k not in ("items", "run_names", "n_trials", "chunks")}
    return blob | {"items": items, "prompts": prompts, "images": images}
