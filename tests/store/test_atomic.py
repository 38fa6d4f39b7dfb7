"""Atomic writes: two writers never collide on a temp name, and a write that fails or is killed midway
leaves the old file whole (facet_probe.store.atomic, and the result writers that use it)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pandas as pd
import pytest

from facet_probe.store.atomic import (
    atomic_dir,
    atomic_path,
    atomic_write_bytes,
    atomic_write_text,
    remove_stale_temps,
)

ROOT = Path(__file__).resolve().parents[2]

HAMMER = """
import sys
from pathlib import Path
from facet_probe.store.run_folder import RunFolder
from facet_probe.store.run_status import StatusSettings, StatusWriter

settings = StatusSettings(k=6, seed=42, repeats=1, limit=None, prompt_mode="direct")
status = StatusWriter(RunFolder(Path(sys.argv[1])), settings)
failures = 0
for i in range(int(sys.argv[2])):
    try:
        status.write("running", writer=sys.argv[3], step=i)
    except OSError:
        failures += 1
print(failures)
"""


def python(code: str, *args: str, **popen) -> subprocess.Popen:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(code), *args], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **popen)


@pytest.mark.slow
def test_two_processes_hammering_run_status_all_succeed_and_it_always_parses(tmp_path):
    writers = [python(HAMMER, str(tmp_path), "300", name) for name in ("a", "b")]
    reads = 0
    while any(w.poll() is None for w in writers):
        path = tmp_path / "run_status.json"
        if path.exists():
            assert json.loads(path.read_text())["state"] == "running"  # never torn, never empty
            reads += 1
    outs = [w.communicate() for w in writers]
    assert [w.returncode for w in writers] == [0, 0], [err[-2000:] for _, err in outs]
    assert [int(out.split()[-1]) for out, _ in outs] == [0, 0]  # all 600 writes succeeded
    assert reads > 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run_status.json"]  # no temp file left over


def test_a_body_that_raises_leaves_the_old_file_and_no_temp(tmp_path):
    path = tmp_path / "summary.csv"
    path.write_text("old\n")
    with pytest.raises(RuntimeError), atomic_path(path) as tmp:
        tmp.write_text("half of the ne")
        raise RuntimeError("disk full")
    assert path.read_text() == "old\n"
    assert list(tmp_path.iterdir()) == [path]


def test_the_temp_keeps_the_suffix_so_libraries_pick_the_format(tmp_path):
    with atomic_path(tmp_path / "t.parquet") as tmp:
        assert tmp.suffix == ".parquet" and tmp.parent == tmp_path and tmp.name.startswith(".")
        pd.DataFrame({"a": [1, 2]}).to_parquet(tmp)
    assert pd.read_parquet(tmp_path / "t.parquet")["a"].tolist() == [1, 2]
    assert atomic_write_text(tmp_path / "a.txt", "é").read_text(encoding="utf-8") == "é"
    assert atomic_write_bytes(tmp_path / "b.bin", b"\0\1").read_bytes() == b"\0\1"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.txt", "b.bin", "t.parquet"]


def test_a_write_killed_midway_leaves_the_old_file(tmp_path):
    path = tmp_path / "report.md"
    path.write_text("the old, complete report\n")
    proc = python("""
        import sys, time
        from facet_probe.store.atomic import atomic_path
        with atomic_path(sys.argv[1]) as tmp:
            with open(tmp, "w") as fh:
                fh.write("the new rep")
                fh.flush()
                print("ready", flush=True)
                time.sleep(60)
        """, str(path))
    assert proc.stdout.readline().strip() == "ready"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert path.read_text() == "the old, complete report\n"
    leftovers = [p.name for p in tmp_path.iterdir() if p != path]
    assert len(leftovers) == 1 and leftovers[0].startswith(".report.md.")  # hidden, never read as a result


SLOW_PNG = """
import sys, time
from pathlib import Path
import pandas as pd
import PIL.ImageFile
from facet_probe.report import figures

def stalled_save(im, fp, tile, bufsize=0):  # a disk that stalls mid-write: some bytes out, then a kill
    fp.write(b"torn")
    fp.fp.flush()
    print("ready", flush=True)
    time.sleep(60)

PIL.ImageFile._save = stalled_save
summary = pd.DataFrame({"model": ["m"], "facet": ["f"], "dataset": ["d"], "flip_rate": [0.5],
                        "flip_rate_lo": [0.4], "flip_rate_hi": [0.6], "accuracy": [0.9]})
figures.save(figures.flip_rate_figure(summary), Path(sys.argv[1]))
"""


def test_a_report_figure_killed_while_written_is_not_left_torn(tmp_path):
    path = tmp_path / "figures" / "flip_rate.png"
    path.parent.mkdir()
    path.write_bytes(b"old png")
    proc = python(SLOW_PNG, str(path))
    line = proc.stdout.readline().strip()
    assert line == "ready", proc.stderr.read()[-2000:]
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert path.read_bytes() == b"old png"


def test_atomic_dir_swaps_a_whole_folder_or_leaves_the_old_one(tmp_path):
    target = tmp_path / "modal"
    with atomic_dir(target) as tmp:
        (tmp / "theta.csv").write_text("1\n")
    assert (target / "theta.csv").read_text() == "1\n"
    with pytest.raises(KeyboardInterrupt), atomic_dir(target) as tmp:
        (tmp / "theta.csv").write_text("2")
        raise KeyboardInterrupt
    assert [p.name for p in tmp_path.iterdir()] == ["modal"]
    assert sorted(p.name for p in target.iterdir()) == ["theta.csv"] and (target / "theta.csv").read_text() == "1\n"
    with atomic_dir(target, ours={"theta.csv", "item_params.csv"}) as tmp:  # theta.csv, ours, is not written again
        (tmp / "item_params.csv").write_text("3\n")
    assert sorted(p.name for p in target.iterdir()) == ["item_params.csv"]
    assert [p.name for p in tmp_path.iterdir()] == ["modal"]


def test_atomic_dir_keeps_every_file_it_did_not_write(tmp_path):
    """Issue 61: swapping a folder in whole deleted a user's files in it (ODI's `modal/notes.txt`). Files of the old
    folder that are not ours and that the new one does not hold are carried over; a file of ours that the new
    folder does not hold is dropped; a name the new folder writes is replaced."""
    target = tmp_path / "modal"
    with atomic_dir(target) as tmp:
        (tmp / "figures").mkdir()
        (tmp / "figures" / "theta.png").write_text("png 1")
        (tmp / "posterior.nc").write_text("draws 1")
    mine = {"notes.txt": "my notes", "figures/mine.png": "my figure", "drafts/a/b.txt": "deep"}
    for rel, text in mine.items():
        (target / rel).parent.mkdir(parents=True, exist_ok=True)
        (target / rel).write_text(text)
    (target / "link").symlink_to("notes.txt")
    with atomic_dir(target, ours={"figures/theta.png", "posterior.nc"}) as tmp:
        (tmp / "figures").mkdir()
        (tmp / "figures" / "theta.png").write_text("png 2")
    assert {rel: (target / rel).read_text() for rel in mine} == mine
    assert (target / "link").is_symlink() and (target / "link").read_text() == "my notes"
    assert (target / "figures" / "theta.png").read_text() == "png 2" and not (target / "posterior.nc").exists()
    assert [p.name for p in tmp_path.iterdir()] == ["modal"]


def test_a_folder_a_kill_left_aside_between_the_renames_is_moved_back_whole(tmp_path):
    """Killed between `atomic_dir`'s two renames, the old folder (with the user's files in it) sits aside under a
    temp name: the next write beside it moves it back rather than deleting it."""
    aside = tmp_path / f".modal.{dead_pid()}-0123abcd.old"
    aside.mkdir()
    (aside / "notes.txt").write_text("my notes")
    (tmp_path / f".{aside.name[1:-4]}.partial").mkdir()  # the new folder, not yet in place
    remove_stale_temps(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["modal"]
    assert (tmp_path / "modal" / "notes.txt").read_text() == "my notes"


def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_a_figure_write_killed_leaves_a_temp_that_the_next_write_removes(tmp_path):
    """The report killed while it writes a figure leaves a hidden temp; writing that figure again (the next
    report) removes it, and the figure is whole."""
    from facet_probe.report import figures

    path = tmp_path / "figures" / "flip_rate.png"
    path.parent.mkdir()
    path.write_bytes(b"old png")
    proc = python(SLOW_PNG, str(path))
    assert proc.stdout.readline().strip() == "ready", proc.stderr.read()[-2000:]
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert len(list(path.parent.iterdir())) == 2  # the old figure and the killed write's temp
    summary = pd.DataFrame({"model": ["m"], "facet": ["f"], "dataset": ["d"], "flip_rate": [0.5],
                            "flip_rate_lo": [0.4], "flip_rate_hi": [0.6], "accuracy": [0.9]})
    figures.save(figures.flip_rate_figure(summary), path)
    assert [p.name for p in path.parent.iterdir()] == ["flip_rate.png"]
    assert path.read_bytes().startswith(b"\x89PNG")


def test_only_temps_whose_writer_is_gone_are_removed(tmp_path):
    """A temp of a gone process (in today's naming or the older one, and a half-built folder) is removed by
    the next write; one a live process is writing, or one written on another host, is left alone."""
    path = tmp_path / "report.md"
    gone = dead_pid()
    stale = [tmp_path / f".report.md.{gone}-0123abcd.tmp.md", tmp_path / f".summary.csv.{gone}-0123abcd.tmp.csv"]
    for p in stale:
        p.write_text("half")
    (tmp_path / f".modal.{gone}-0123abcd.partial").mkdir()
    (tmp_path / f".modal.{gone}-0123abcd.partial" / "theta.csv").write_text("1")
    other_host = tmp_path / f".report.md.ffffffff-{gone}-0123abcd.tmp.md"
    other_host.write_text("another machine is writing this")
    writer = python("""
        import sys, time
        from facet_probe.store.atomic import atomic_path
        with atomic_path(sys.argv[1]) as tmp:
            tmp.write_text("the new rep")
            print(tmp, flush=True)
            time.sleep(60)
        """, str(path))
    live = Path(writer.stdout.readline().strip())
    try:
        assert live.exists()
        atomic_write_text(path, "report\n")
        left = sorted(p.name for p in tmp_path.iterdir())
        assert left == sorted([live.name, other_host.name, "report.md"])
    finally:
        writer.kill()
        writer.wait()


def test_background_writes_finish_before_the_block_ends_and_their_failure_is_raised(tmp_path):
    import threading

    from facet_probe.store.atomic import atomic_write_text, background_writes

    threads = []

    def write(path, text):
        threads.append(threading.current_thread())
        atomic_write_text(path, text)

    with background_writes() as later:
        later(write, tmp_path / "a.txt", "one")
        later(write, tmp_path / "b.txt", "two")
    assert (tmp_path / "a.txt").read_text() == "one" and (tmp_path / "b.txt").read_text() == "two"
    assert threading.main_thread() not in threads  # beside the caller, not in its thread

    def fail():
        raise OSError(28, "No space left on device")

    with pytest.raises(OSError, match="No space"), background_writes() as later:
        later(fail)
        later(write, tmp_path / "c.txt", "three")
    assert (tmp_path / "c.txt").read_text() == "three"  # the writes after a failed one still ran
