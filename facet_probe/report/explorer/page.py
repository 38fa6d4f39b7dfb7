"""The explorer page: the data's index as one JSON script element, the hand-written JS and CSS inline, and the
items' details in chunks (`chunks`) read only when an item opens.

A page whose chunks total at most `INLINE_BYTES` holds them too, as JSON script elements the page parses on
first use: one self-contained file that opens from disk with no server. A larger page (a paper-scale panel)
has them beside it as `explorer_data/<token>-<i>.js` files, each a classic script that hands its chunk to
the page (Chromium lets a page opened over file:// load a script from its folder, but not fetch() a file).
Image files it refers to are named relative to the page (`seen.Seen`).

Writes keep a page whole with its data: the new chunk files are recorded (`RECORD`), written (atomically, under
names no earlier build used), then the page, then every other recorded chunk file is removed, so a kill leaves
the old page with its old chunks or the new page with its new ones, and a chunk of another build is never read
(its token differs). Only the chunk files the record names are ever removed: a file of the user's in
`explorer_data/`, even one named like a chunk, is left alone.
"""

from __future__ import annotations

import html
import json
import math
import re
from importlib.resources import files
from pathlib import Path

from facet_probe.report.explorer.chunks import Split, merge, split
from facet_probe.store.atomic import atomic_write_text

PAGE = "explorer.html"
#: The folder of a large page's chunk files, beside the page.
DATA_DIR = "explorer_data"
#: Chunks up to this many bytes in all stay inside the page (the default audit's 7,200 trials: about 5 MB).
INLINE_BYTES = 8_000_000
#: The call each chunk file makes: `facetProbeExplorerChunk("<token>", <i>, {...});`
CALL = "facetProbeExplorerChunk"
#: The chunk files of DATA_DIR that builds wrote and have not removed yet (a JSON list of names, in DATA_DIR).
RECORD = "chunks_written.json"
_CHUNK_FILE = re.compile(r"[0-9a-f]{12}-\d{4,}\.js")
_INLINE = re.compile(r'<script type="application/json" id="chunk-(\d+)">(.*?)</script>', re.S)


def _asset(name: str) -> str:
    return (files("facet_probe.report.explorer") / "assets" / name).read_text(encoding="utf-8")


def finite(value):
    """The blob with every NaN / infinity as null (JSON has neither; the page's JSON.parse would fail)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [finite(v) for v in value]
    return value


def chunk_name(token: str, i: int) -> str:
    return f"{token}-{i:04d}.js"


def _script_safe(text: str) -> str:
    """JSON inside a script element: `</` escaped so no string can close the element."""
    return text.replace("</", "<\\/")


def render_page(parts: Split, inline: bool) -> str:
    """The HTML text: the index, and the chunks when `inline` (else the page loads them from DATA_DIR)."""
    index = {**parts.index, "runs": finite(parts.index.get("runs", [])),  # trials and items are JSON-safe as read
             "chunks": {"token": parts.token, "n": len(parts.chunks), "dir": None if inline else DATA_DIR}}
    data = _script_safe(json.dumps(index, ensure_ascii=False, separators=(",", ":"), default=str))
    held = "".join(f'<script type="application/json" id="chunk-{i}">{_script_safe(c)}</script>\n'
                   for i, c in enumerate(parts.chunks)) if inline else ""
    return ("<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{html.escape(index.get('title', 'facet_probe explorer'))}</title>"
            "<meta name=\"generator\" content=\"facet_probe.explore\">"
            f"<style>{_asset('explorer.css')}</style></head>\n<body>\n"
            "<header></header><div class=\"controls\"></div><main><div id=\"list\"></div><div id=\"detail\"></div></main>\n"
            f"<script id=\"data\" type=\"application/json\">{data}</script>\n{held}"
            f"<script>{_asset('explorer.js')}</script>\n</body></html>\n")


def write_page(blob: dict, folder: Path) -> Path:
    """`<folder>/explorer.html` over `blob` (`data.Blob.to_json`), its chunks inside it or in DATA_DIR."""
    parts = split(blob)
    inline = sum(len(c) for c in parts.chunks) <= INLINE_BYTES
    data_dir = folder / DATA_DIR
    keep = set() if inline else {chunk_name(parts.token, i) for i in range(len(parts.chunks))}
    if keep:
        _record(data_dir, written_chunks(folder) | keep)  # before they exist: a kill leaves none unrecorded
        for i, text in enumerate(parts.chunks):
            atomic_write_text(data_dir / chunk_name(parts.token, i), f'{CALL}("{parts.token}",{i},{text});\n')
    path = folder / PAGE
    atomic_write_text(path, render_page(parts, inline))
    remove_chunks(folder, keep)
    return path


def written_chunks(folder: Path) -> set[str]:
    """The names of the chunk files in `<folder>/explorer_data` that builds recorded writing (RECORD)."""
    try:
        names = json.loads((folder / DATA_DIR / RECORD).read_text(encoding="utf-8"))
    except (FileNotFoundError, ValueError):
        return set()
    return {n for n in names if isinstance(n, str) and _CHUNK_FILE.fullmatch(n)} if isinstance(names, list) else set()


def _record(data_dir: Path, names: set[str]) -> None:
    if names:
        atomic_write_text(data_dir / RECORD, json.dumps(sorted(names)))
    else:
        (data_dir / RECORD).unlink(missing_ok=True)


def remove_chunks(folder: Path, keep: set[str] | frozenset[str] = frozenset()) -> None:
    """Remove the recorded chunk files in `<folder>/explorer_data` but `keep` (and the folder, once empty): the
    ones of an earlier build, or all of them where the page is removed (call it with no `keep` beside unlinking
    the page). A file the record does not name is never removed."""
    data_dir = folder / DATA_DIR
    if not data_dir.is_dir():
        return
    for name in written_chunks(folder) - keep:
        (data_dir / name).unlink(missing_ok=True)
    _record(data_dir, set(keep))
    if not any(data_dir.iterdir()):
        data_dir.rmdir()


def read_page(path: Path) -> dict:
    """The blob a page shows, read back from the page and its chunks (`data.Blob.to_json`'s shape): for tests
    and tools that look at a page's data without a browser."""
    text = Path(path).read_text(encoding="utf-8")
    start = text.index('<script id="data" type="application/json">') + len('<script id="data" type="application/json">')
    index = json.loads(text[start:text.index("</script>", start)])
    spec = index["chunks"]
    if spec["dir"] is None:
        raw = {int(i): body for i, body in _INLINE.findall(text)}
        chunks = [json.loads(raw[i]) for i in range(spec["n"])]
    else:
        prefix = f'{CALL}("{spec["token"]}",'
        chunks = []
        for i in range(spec["n"]):
            body = (Path(path).parent / spec["dir"] / chunk_name(spec["token"], i)).read_text(encoding="utf-8")
            if not (body.startswith(f"{prefix}{i},") and body.endswith(");\n")):
                raise ValueError(f"{spec['dir']}/{chunk_name(spec['token'], i)} beside {path} is not this page's chunk "
                                 "file: build the page again")
            chunks.append(json.loads(body[len(f"{prefix}{i},"):-3]))
    return merge(index, chunks)
