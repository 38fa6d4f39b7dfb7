"""The explorer page: the blob as one JSON script element, with the hand-written JS and CSS inline.

One self-contained file, so it opens from disk with no server and no download; image files it refers to
are named relative to the page (`seen.Seen`)."""

from __future__ import annotations

import html
import json
import math
from importlib.resources import files
from pathlib import Path

from facet_probe.store.atomic import atomic_write_text

PAGE = "explorer.html"


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


def render_page(blob: dict) -> str:
    """The HTML text: `</` inside the JSON is escaped so no string can close the script element."""
    blob = {**blob, "runs": finite(blob.get("runs", []))}  # trials and items are made JSON-safe as they are read
    data = json.dumps(blob, ensure_ascii=False, separators=(",", ":"), default=str).replace("</", "<\\/")
    return ("<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{html.escape(blob.get('title', 'facet_probe explorer'))}</title>"
            "<meta name=\"generator\" content=\"facet_probe.explore\">"
            f"<style>{_asset('explorer.css')}</style></head>\n<body>\n"
            "<header></header><div class=\"controls\"></div><main><div id=\"list\"></div><div id=\"detail\"></div></main>\n"
            f"<script id=\"data\" type=\"application/json\">{data}</script>\n"
            f"<script>{_asset('explorer.js')}</script>\n</body></html>\n")


def write_page(blob: dict, folder: Path) -> Path:
    path = folder / PAGE
    atomic_write_text(path, render_page(blob))
    return path
