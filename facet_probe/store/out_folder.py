"""An app's output folder: written only when it is new, empty or the app's own earlier output.

Every app that takes an output folder (report, explore, ODI, paper, decoder, the attack's run folder, a sweep's
root) claims it first: a folder that holds files but none of the app's marker files (the status or record file
it writes, e.g. ODI's odi_status.json) is someone else's, and is refused in one line before anything is
written. In its own folder an app replaces only the files it writes, by name, and removes only files it
recorded writing: a user's file there is left as it is (docs/bad_input.md, "Output folders").
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from pathlib import Path

from facet_probe.core.errors import ConfigError


def check(folder: str | Path, app: str, markers: Sequence[str], setting: str = "out",
          ignore: Collection[str] = (), inputs: Iterable[Path] = ()) -> Path:
    """`folder`, if it is new, empty (but for `ignore`: what Hydra wrote there for this run), one of `inputs` (a run
    folder the app writes beside its trials, as the report does by default) or `app`'s own earlier output (it
    holds one of `markers`); else a ConfigError naming the folder and the fix. Creates nothing."""
    folder = Path(folder)
    if any(folder.resolve() == Path(f).resolve() for f in inputs):
        return folder
    if folder.exists() and not folder.is_dir():
        raise ConfigError(f"{setting}={folder} is a file, not a folder: give {setting}= a new folder for {app}'s "
                          "outputs")
    held = sorted(p.name for p in folder.iterdir() if p.name not in ignore) if folder.is_dir() else []
    if held and not any((folder / marker).exists() for marker in markers):
        shown = ", ".join(held[:3]) + (f" and {len(held) - 3} more" if len(held) > 3 else "")
        raise ConfigError(f"{setting}: {folder} holds files that {app} did not write ({shown}) and is not its "
                          f"earlier output (no {' or '.join(markers)}); {app} writes only into a new or empty "
                          f"folder or its own, so that nothing of yours is overwritten or deleted: choose a new "
                          f"{setting}= or remove that folder")
    return folder


def claim(folder: str | Path, app: str, markers: Sequence[str], setting: str = "out",
          ignore: Collection[str] = ()) -> Path:
    """`check` the folder, then create it (an app that writes into it at once)."""
    folder = check(folder, app, markers, setting, ignore)
    folder.mkdir(parents=True, exist_ok=True)
    return folder
