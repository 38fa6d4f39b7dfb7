"""Shared I/O for the upstream loaders: find the files, read them, resolve images, cache converted items.

Upstream files are looked up, in order, in `dataset.path` (a local copy laid out exactly as the
upstream repository publishes it) and in the Hugging Face cache (`huggingface_hub.snapshot_download`,
which downloads when the network allows). When neither has them, `DatasetUnavailable` says which
files to fetch, from where, and where to put them. Converted samples are cached as JSON lines of the item
records (`$FACET_PROBE_CACHE/items/`): data only, so a cache folder shared with others can never run code.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import zipfile
from abc import abstractmethod
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, ClassVar

from facet_probe.core.items import ImageRef, Item, ItemError, check_unique_ids
from facet_probe.datasets.base import DatasetLoader, DatasetUnavailable, asked, stable_sample
from facet_probe.datasets.reference_sampling import Draw, Sampling, reference_select
from facet_probe.store.atomic import atomic_write_bytes, atomic_write_text

CACHE_ENV = "FACET_PROBE_CACHE"
IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".gif", ".bmp", ".webp", ".tif", ".tiff")


# --------------------------------------------------------------------------- locating files
@dataclass(frozen=True)
class Upstream:
    """Where a dataset comes from: a hub dataset repo (or a homepage) and the file patterns the loader reads.

    `patterns` are globs relative to the repository root; every one must match at least one file.
    `optional` patterns are fetched when present but not required (e.g. an image archive that may
    also be provided unpacked).
    """

    repo_id: str | None
    patterns: tuple[str, ...]
    optional: tuple[str, ...] = ()
    homepage: str = ""
    revision: str | None = None

    @property
    def url(self) -> str:
        return f"https://huggingface.co/datasets/{self.repo_id}" if self.repo_id else self.homepage


def cache_root() -> Path:
    """Where converted items and extracted images are cached (`$FACET_PROBE_CACHE`, else ~/.cache)."""
    return Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "facet_probe").expanduser()


def missing_patterns(root: Path, patterns: Iterable[str]) -> list[str]:
    """The patterns with no matching file under `root`."""
    return [p for p in patterns if not any(f.is_file() for f in root.glob(p))]


def files_matching(root: Path, pattern: str) -> list[Path]:
    """Files under `root` matching `pattern`, sorted (shards in order)."""
    return sorted(f for f in root.glob(pattern) if f.is_file())


def _offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in {"1", "true", "yes", "on"}


def _from_hf_cache(repo_id: str, upstream: Upstream, local_only: bool) -> Path:
    from huggingface_hub import snapshot_download

    folder = snapshot_download(
        repo_id,
        repo_type="dataset",
        revision=upstream.revision,
        allow_patterns=list(upstream.patterns + upstream.optional),
        cache_dir=os.environ.get("HF_HUB_CACHE") or None,
        local_files_only=local_only or _offline(),
    )
    return Path(folder)


def unavailable_message(
    dataset: str, upstream: Upstream, path: Path | None, missing: Sequence[str], cause: str | None = None
) -> str:
    """Say which upstream files are missing, where to get them and where to put them."""
    files = ", ".join(missing)
    where = f"in {path}" if path else "(no dataset.path given, and not in the Hugging Face cache)"
    lines = [f"dataset {dataset}: upstream files not found {where}: {files}."]
    if upstream.repo_id:
        include = " ".join(f"--include '{p}'" for p in (*upstream.patterns, *upstream.optional))
        target = path or f"<folder>/{dataset}"
        lines.append(
            f"Fetch them from {upstream.url} (on a connected machine: `hf download "
            f"{upstream.repo_id} --repo-type dataset {include} --local-dir {target}`), keep the "
            f"repository's layout, and pass dataset.path={target} (or data_root=<folder>)."
        )
    else:
        lines.append(
            f"Fetch them from {upstream.url}, put them in one folder with the layout shown above "
            f"(file names unchanged), and pass dataset.path=<that folder>."
        )
    if cause:
        lines.append(f"(Hugging Face cache lookup: {cause})")
    return " ".join(lines)


def locate(dataset: str, upstream: Upstream, path: Path | None) -> Path:
    """The folder holding the upstream files: `path` if it has them, else the Hugging Face cache."""
    if path is not None:
        missing = missing_patterns(path, upstream.patterns) if path.is_dir() else list(upstream.patterns)
        if not missing:
            return path
    else:
        missing = list(upstream.patterns)
    cause = None
    if upstream.repo_id:
        try:
            folder = _from_hf_cache(upstream.repo_id, upstream, local_only=path is not None)
            if not missing_patterns(folder, upstream.patterns):
                return folder
            missing = missing_patterns(folder, upstream.patterns)
        except Exception as exc:  # offline, not cached, gated, no network: all mean "not here"
            cause = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}".strip()
    raise DatasetUnavailable(unavailable_message(dataset, upstream, path, missing, cause))


# --------------------------------------------------------------------------- reading files
def iter_parquet(
    files: Sequence[Path], columns: Sequence[str] | None = None, batch_size: int = 256
) -> Iterator[dict[str, Any]]:
    """Rows of parquet shards in order, batch-wise; each row gets `_file` and `_row` (index in its file)."""
    import pyarrow.parquet as pq

    for file in files:
        pf = pq.ParquetFile(file)
        if columns is not None:
            absent = [c for c in columns if c.split(".")[0] not in pf.schema_arrow.names]
            if absent:
                raise ItemError(
                    f"{file}: missing column(s) {absent}; found {pf.schema_arrow.names}. "
                    "Is this the upstream file, unmodified?"
                )
        row = 0
        for batch in pf.iter_batches(batch_size=batch_size, columns=list(columns) if columns else None):
            for record in batch.to_pylist():
                record["_file"], record["_row"] = str(file), row
                row += 1
                yield record


def leaf_path(file: str | Path, top: str, leaf: str) -> str:
    """The dotted parquet path of a nested leaf, e.g. ("images", "path") -> "images.list.element.path",
    so that a light field can be read without the heavy bytes beside it."""
    import pyarrow.parquet as pq

    schema = pq.ParquetFile(file).schema
    for i in range(len(schema)):
        path = schema.column(i).path
        if path.split(".")[0] == top and path.split(".")[-1] == leaf:
            return path
    raise ItemError(
        f"{file}: no field {leaf!r} inside column {top!r}; is this the upstream file, unmodified?"
    )


def take_parquet_rows(
    file: str | Path, rows: Iterable[int], columns: Sequence[str], batch_size: int = 64
) -> dict[int, dict[str, Any]]:
    """Selected rows (by index) of one parquet file, reading only `columns` (e.g. heavy image columns)."""
    import pyarrow.parquet as pq

    wanted = set(rows)
    out: dict[int, dict[str, Any]] = {}
    offset = 0
    for batch in pq.ParquetFile(file).iter_batches(batch_size=batch_size, columns=list(columns)):
        hits = [i - offset for i in wanted if offset <= i < offset + batch.num_rows]
        if hits:
            part = batch.take(hits).to_pylist()
            out.update({offset + i: rec for i, rec in zip(hits, part, strict=True)})
        offset += batch.num_rows
        if len(out) == len(wanted):
            break
    return out


def fetch_columns(candidates: Sequence[Candidate], columns: Sequence[str]) -> list[dict[str, Any]]:
    """Each candidate's row completed with heavy `columns` read only for these rows (grouped by file)."""
    by_file: dict[str, list[int]] = {}
    for c in candidates:
        by_file.setdefault(c.row["_file"], []).append(c.row["_row"])
    taken = {f: take_parquet_rows(f, rows, columns) for f, rows in by_file.items()}
    return [{**c.row, **taken[c.row["_file"]][c.row["_row"]]} for c in candidates]


def read_jsonl(file: Path) -> Iterator[Any]:
    """JSON values, one per non-empty line (gzip-aware)."""
    opener = gzip.open if file.suffix == ".gz" else open
    with opener(file, "rt", encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if line.strip():
                try:
                    yield json.loads(line)
                except json.JSONDecodeError as exc:
                    raise ItemError(f"{file}:{lineno}: not valid JSON ({exc.msg})") from None


def read_json(file: Path) -> Any:
    with open(file, encoding="utf-8") as fh:
        return json.load(fh)


# --------------------------------------------------------------------------- images
def hf_image(value: Any, item_id: str, what: str = "image") -> ImageRef:
    """An image stored the Hugging Face way (`{"bytes": ..., "path": ...}` struct, raw bytes or a path)."""
    if isinstance(value, dict):
        data, path = value.get("bytes"), value.get("path")
    elif isinstance(value, (bytes, bytearray)):
        data, path = bytes(value), None
    else:
        data, path = None, value
    if data:
        return ImageRef.from_bytes(bytes(data))
    if path and Path(path).is_file():
        return ImageRef.from_path(path)
    raise ItemError(
        f"item {item_id}: {what} has no bytes and its path {path!r} is not a file; "
        "re-fetch the upstream parquet file (images are embedded in it)"
    )


class ImageStore:
    """Image files of a dataset, unpacked in folders or inside zip archives, looked up by relative path
    or by file name. Zip members are extracted once into the cache and referred to by path."""

    def __init__(
        self,
        dataset: str,
        folders: Sequence[Path] = (),
        zips: Sequence[Path] = (),
        hint: str = "",
        within: str | None = None,
    ) -> None:
        self.dataset = dataset
        self.within = within  # index only files below a folder of this name (archives of several datasets)
        self.hint = hint or "fetch the upstream image archive and keep its layout"
        self.sources = [str(p) for p in (*folders, *zips) if p.exists()]
        self._files: dict[str, Path] = {}
        self._members: dict[str, tuple[Path, str]] = {}
        for folder in folders:
            if not folder.is_dir():
                continue
            for f in folder.rglob("*"):
                if (
                    f.suffix.lower() in IMAGE_SUFFIXES
                    and f.is_file()
                    and self._wanted(f.relative_to(folder).parts)
                ):
                    rel = f.relative_to(folder).as_posix()
                    self._files.setdefault(rel, f)
                    self._files.setdefault(f.name, f)
        for archive in zips:
            if not archive.is_file():
                continue
            with zipfile.ZipFile(archive) as zf:
                for name in zf.namelist():
                    member = PurePosixPath(name)
                    if member.suffix.lower() in IMAGE_SUFFIXES and self._wanted(member.parts):
                        self._members.setdefault(name, (archive, name))
                        self._members.setdefault(PurePosixPath(name).name, (archive, name))

    def _wanted(self, parts: Sequence[str]) -> bool:
        return self.within is None or self.within in parts[:-1]

    def __contains__(self, name: str) -> bool:
        return self._key(name) is not None

    def _key(self, name: str) -> str | None:
        name = str(name).replace("\\", "/").lstrip("./")
        for key in (name, PurePosixPath(name).name):
            if key in self._files or key in self._members:
                return key
        return None

    def get(self, name: str, item_id: str) -> ImageRef:
        """The image called `name` (a relative path or a file name); a clear error if it is missing."""
        key = self._key(name)
        if key is None:
            where = ", ".join(self.sources) or "(no image folder or archive found)"
            raise ItemError(f"item {item_id}: image file {name!r} not found in {where}; {self.hint}")
        if key in self._files:
            return ImageRef.from_path(self._files[key])
        archive, member = self._members[key]
        target = cache_root() / "images" / self.dataset / archive.stem / member
        if not target.is_file():
            target.parent.mkdir(parents=True, exist_ok=True)
            with zipfile.ZipFile(archive) as zf:
                atomic_write_bytes(target, zf.read(member))  # unique temp: parallel shards never collide
        return ImageRef.from_path(target)


class Archive:
    """A zip archive read as the reference reads it: a member by its exact name (its `zf.read(name)`, a
    KeyError when absent), no search by file name; the names are listed once."""

    def __init__(self, dataset: str, file: Path) -> None:
        self.dataset, self.file = dataset, file
        with zipfile.ZipFile(file) as zf:
            self.names = frozenset(zf.namelist())

    @classmethod
    def found(cls, dataset: str, root: Path, names: Sequence[str], source: str) -> Archive:
        """The first of the archives `names` in `root`; DatasetUnavailable naming them and `source` when none is."""
        for name in names:
            if (root / name).is_file():
                return cls(dataset, root / name)
        raise DatasetUnavailable(f"dataset {dataset}: sampling=reference reads the images from {' or '.join(names)}, "
                                 f"as the reference does: fetch it from {source} into {root}")

    def first(self, names: Iterable[str]) -> str | None:
        """The first of `names` the archive holds, or None."""
        return next((n for n in names if n in self.names), None)

    def read(self, names: Sequence[str]) -> list[ImageRef]:
        """The members as images, in the order given (extracted once into the cache, as ImageStore does)."""
        out = []
        with zipfile.ZipFile(self.file) as zf:
            for name in names:
                target = cache_root() / "images" / self.dataset / self.file.stem / name
                if not target.is_file():
                    target.parent.mkdir(parents=True, exist_ok=True)
                    atomic_write_bytes(target, zf.read(name))
                out.append(ImageRef.from_path(target))
        return out


# --------------------------------------------------------------------------- lazy, cached loading
@dataclass(frozen=True)
class Candidate:
    """An eligible upstream row before conversion: its item id and whatever `build` needs."""

    item_id: str
    row: dict[str, Any] = field(repr=False)


class UpstreamLoader(DatasetLoader):
    """A loader over upstream files: rows -> eligible candidates -> sample -> items (built only for the
    sample), with converted samples cached on disk keyed by the options and the upstream files.

    Subclasses declare `upstream` and implement `candidates()` (filtered, in upstream order) and
    `build(candidate)`; the sample is the base class's prefix-stable hash order over item ids.
    """

    @property
    def upstream(self) -> Upstream:
        """The upstream repository and the files the loader reads (a subclass sets a class attribute or a
        property)."""
        raise NotImplementedError(f"{type(self).__name__} declares no upstream")

    #: Bump when the row -> item conversion changes, to invalidate cached items.
    conversion_version: ClassVar[int] = 1

    def __init__(
        self,
        name: str,
        path: str | None = None,
        n: int | None = None,
        seed: int = 42,
        cache: bool = True,
        **options,
    ) -> None:
        super().__init__(name, path, n, seed, **options)
        self.cache = cache
        self._root: Path | None = None

    @property
    def root(self) -> Path:
        """The folder holding the upstream files (located once)."""
        if self._root is None:
            self._root = locate(self.name, self.upstream, self.path)
        return self._root

    def files(self, pattern: str) -> list[Path]:
        return files_matching(self.root, pattern)

    def rows(self) -> Iterator[dict[str, Any]]:
        """Every row of the split in upstream order, eligible or not (loaders whose reference draw reads a
        buffer of raw rows define it, with `candidate`)."""
        raise NotImplementedError(f"{type(self).__name__} defines candidates() only")

    def candidate(self, row: dict[str, Any]) -> Candidate | None:
        """The row as a candidate, or None when it fails the dataset's filter."""
        raise NotImplementedError(f"{type(self).__name__} defines candidates() only")

    def reference_admits(self, row: dict[str, Any]) -> bool:
        """Whether the reference lets a raw row into its buffer (Mantis-Eval pre-filters; others take all)."""
        return True

    def candidates(self) -> Iterator[Candidate]:
        """Eligible rows (after the dataset's filter) in upstream order."""
        for row in self.rows():
            if (found := self.candidate(row)) is not None:
                yield found

    @abstractmethod
    def build(self, candidate: Candidate) -> Item:
        """One validated item."""

    def build_many(self, candidates: Sequence[Candidate]) -> list[Item]:
        """Items for several candidates (override to batch expensive reads such as image columns)."""
        return [self.build(c) for c in candidates]

    def load_all(self) -> list[Item]:
        return self.build_many(list(self.candidates()))

    def load(self, limit: int | None = None) -> list[Item]:
        if self.sampling is Sampling.REFERENCE:
            return self.load_reference(limit)
        self._skipped.clear()
        items = self._cached()
        if items is None:
            keep = self.first_of_each_id()
            candidates = [c for c in self.candidates() if keep(c.item_id)]
            # stable_sample ranks by item id alone, so sampling candidates equals sampling built items.
            items = self.build_many(stable_sample(candidates, self.n, self.seed))
            self._store(items)
        return items[:limit] if limit is not None else items

    def load_reference(self, limit: int | None = None) -> list[Item]:
        """The reference runner's items: its target (`limit` when given, else `n`), draw and item ids; our
        own id stays in `metadata["stable_item_id"]`."""
        target = asked(self.n, limit)
        self._skipped.clear()
        items = self._cached(target)
        if items is None:
            items = self.build_reference(self.reference_candidates(target))
            check_unique_ids(items)
            self._store(items, target)
        return items

    def reference_candidates(self, target: int | None) -> list[tuple[str, Candidate]]:
        """(reference item id, candidate) in the reference's order. Drawn from every candidate (ELIGIBLE,
        UPSTREAM), a row the reference keeps that no item can hold (`reference_unusable`) or whose id an
        earlier one has is skipped and counted after it took its place in the reference's count (its target
        and its positional ids), as the reference counts it."""
        spec = self.reference
        assert spec is not None  # checked when the loader was made
        keep = self.first_of_each_id()

        def once(candidate: Candidate | None) -> Candidate | None:
            return candidate if candidate is not None and keep(candidate.item_id) else None

        if spec.draw is Draw.BUFFER:
            picked = reference_select(spec, target, self.rows, lambda row: once(self.candidate(row)),
                                      self.reference_admits)
            return [(spec.item_id(c.row, index, taken), c) for taken, (index, c) in enumerate(picked)]
        picked = reference_select(spec, target, self.candidates, lambda c: c, after=self.reference_pick)
        named = [(spec.item_id(c.row, index, taken), c) for taken, (index, c) in enumerate(picked)]
        return [(ref_id, c) for ref_id, c in named if not self.skip(self.reference_unusable(c)) and keep(ref_id)]

    def reference_pick(self, candidate: Candidate) -> Candidate | None:
        """After the reference's shuffle: the candidate as the reference keeps it, or None where it drops the
        row only then (e.g. too few of its images in the archive). Default: kept as it is."""
        return candidate

    def reference_unusable(self, candidate: Candidate) -> str | None:
        """Why a row the reference keeps cannot be an item (skipped and counted), or None. Default: None."""
        return None

    def build_reference(self, picked: Sequence[tuple[str, Candidate]]) -> list[Item]:
        items = self.build_many([c for _, c in picked])
        return [item.model_copy(update={"item_id": ref_id,
                                        "metadata": {**item.metadata, "stable_item_id": item.item_id}})
                for (ref_id, _), item in zip(picked, items, strict=True)]

    # -- cache
    def _cache_file(self, target: int | None = None) -> Path:
        options = {
            k: v for k, v in vars(self).items() if not k.startswith("_") and k not in ("path", "cache")
        }
        if target is not None:
            options["reference_target"] = target
        files = []
        for pattern in (*self.upstream.patterns, *self.upstream.optional):
            for f in files_matching(self.root, pattern):
                stat = f.stat()
                files.append((f.relative_to(self.root).as_posix(), stat.st_size, stat.st_mtime_ns))
        key = json.dumps(
            {
                "cls": f"{type(self).__module__}.{type(self).__qualname__}",
                "version": self.conversion_version,
                "options": options,
                "files": files,
            },
            sort_keys=True,
            default=str,
        )
        digest = hashlib.sha256(key.encode()).hexdigest()[:20]
        return cache_root() / "items" / f"{self.name}-{digest}.jsonl"

    def _cached(self, target: int | None = None) -> list[Item] | None:
        """The cached sample, or None (a miss: rebuild) when there is none or it cannot be read back whole. The
        file is only ever parsed as JSON (an old `.pkl` cache is never opened); an item whose extracted image was
        cleaned up fails validation, so it is a miss too."""
        if not self.cache:
            return None
        file = self._cache_file(target)
        if not file.is_file():
            return None
        try:
            with file.open(encoding="utf-8") as fh:
                head = json.loads(fh.readline())
                items = [Item.model_validate_json(line) for line in fh]
            skipped = {str(reason): int(n) for reason, n in head["skipped"].items()}
            if len(items) != head["items"]:
                return None  # cut short
        except (OSError, ValueError, KeyError, TypeError, AttributeError):  # not ours, torn or unreadable
            return None
        self._skipped.update(skipped)
        return items

    def _store(self, items: list[Item], target: int | None = None) -> None:
        """The sample as JSON lines: a head line with the item count and skip counts, then one item per line
        (images by path, or their bytes as base64)."""
        if not self.cache:
            return
        file = self._cache_file(target)
        file.parent.mkdir(parents=True, exist_ok=True)
        head = json.dumps({"items": len(items), "skipped": self.skipped})
        atomic_write_text(file, "".join([head + "\n", *(item.model_dump_json() + "\n" for item in items)]))


def letter_index(answer: Any, n_choices: int) -> int | None:
    """0-based index of a single-letter answer ("C", "(C)", " c ") within n choices, else None."""
    text = str(answer or "").strip().strip("()").strip().upper()
    if len(text) == 1 and "A" <= text <= "Z" and ord(text) - 65 < n_choices:
        return ord(text) - 65
    return None
