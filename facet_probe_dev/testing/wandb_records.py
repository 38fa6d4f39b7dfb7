"""Read an offline Weights & Biases run back (tests): its `run-<id>.wandb` transaction log holds the run's records
(config, history, summary, files) as W&B's own protobuf `Record`s, framed as a LevelDB log: after a 7-byte file
header, 32 KiB blocks of chunks, each with a 7-byte header (crc32, length, type: full, first, middle, last)."""

from __future__ import annotations

import json
import struct
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

BLOCK = 32768
HEADER = 7
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4


def records(path: Path) -> Iterator[Any]:
    """Every record of a `.wandb` file, in order (wandb.proto.wandb_internal_pb2.Record)."""
    from wandb.proto import wandb_internal_pb2  # noqa: PLC0415  (wandb: an optional test dependency)

    data = Path(path).read_bytes()
    if data[:4] != b":W&B":
        raise ValueError(f"{path}: not a W&B transaction log")
    pos, parts = HEADER, b""
    while pos + HEADER <= len(data):
        if (left := BLOCK - pos % BLOCK) < HEADER:  # a block's tail too short for a header is padding
            pos += left
            continue
        _, length, kind = struct.unpack("<IHB", data[pos:pos + HEADER])
        parts += data[pos + HEADER:pos + HEADER + length]
        pos += HEADER + length
        if kind in (FULL, LAST):
            record = wandb_internal_pb2.Record()
            record.ParseFromString(parts)
            parts = b""
            yield record


@dataclass
class OfflineRun:
    """What an offline run recorded: its name, tags, config, summary, and the files in its `files/` folder."""

    folder: Path
    name: str = ""
    tags: list[str] = field(default_factory=list)
    notes: str = ""
    config: dict[str, Any] = field(default_factory=dict)
    summary: dict[str, Any] = field(default_factory=dict)

    @property
    def files(self) -> Path:
        return self.folder / "files"


def read_offline_run(folder: Path, wait_s: float = 30.0) -> OfflineRun:
    """The run in `folder` (`<WANDB_DIR>/wandb/offline-run-*`), from its transaction log, once W&B has written the
    log's last record (`exit`): its service process may still be writing when `run.finish()` has returned (seen once
    under load: a log read with no config in it). After `wait_s` the log is read as it stands."""
    (log,) = Path(folder).glob("run-*.wandb")
    deadline = time.monotonic() + wait_s
    while True:
        try:
            found = list(records(log))
        except Exception:  # noqa: BLE001  (a record still being written: not whole yet)
            found = []
        if any(r.WhichOneof("record_type") == "exit" for r in found) or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    run = OfflineRun(Path(folder))
    for record in found or records(log):
        kind = record.WhichOneof("record_type")
        if kind == "run":
            run.name, run.tags, run.notes = record.run.display_name, list(record.run.tags), record.run.notes
            run.config.update({u.key: json.loads(u.value_json) for u in record.run.config.update})
        elif kind == "config":
            run.config.update({u.key: json.loads(u.value_json) for u in record.config.update})
        elif kind == "summary":
            for u in record.summary.update:
                run.summary["/".join(u.nested_key) if u.nested_key else u.key] = json.loads(u.value_json)
    return run
