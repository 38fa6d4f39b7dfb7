"""A checkpoint folder's files: what names it (a digest of the files that decide its outputs: the weights and
everything that shapes what the model sees), its tokenizer files, a hub snapshot's commit, and the messages
when a hub checkpoint is not in the cache or the hub will not give it (gated, missing, no such revision).

Shared by the base checkpoint (loading.py), PEFT adapters (adapters.py) and the vLLM runner.
"""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path

SNAPSHOT_FILES = ["*.json", "*.safetensors", "*.jinja", "*.model", "*.txt", "*.py", "*.tiktoken"]
#: the files of a checkpoint folder that decide its outputs (not a model card, not a training log): the weights,
#: the model's config and code, and everything that shapes what the model sees: chat templates
#: (chat_template.jinja / .json, additional_chat_templates/, tokenizer_config.json's), the tokenizer's files
#: (its vocabulary, special and added tokens; InstructBLIP's qformer_tokenizer/), processor and image / video
#: preprocessor configs, generation_config.json. Patterns relative to the folder; a folder matched by none of
#: the later ones (after "*.py") has the digest it had before they were added (issue 41), so its trials keep
#: their keys.
MODEL_FILES = ("*.safetensors", "*.bin", "*config.json", "tokenizer*", "*.jinja", "*.model", "*.tiktoken",
               "vocab*", "merges.txt", "*.py",
               "chat_template.json", "special_tokens_map.json", "added_tokens.json", "additional_chat_templates/*",
               "qformer_tokenizer/*")
#: files of which a checkpoint's tokenizer is made (one of them suffices)
TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "vocab.json", "vocab.txt", "*.tiktoken", "tiktoken.model")


def digested_files(folder: Path) -> list[str]:
    """The files of `folder` that name it (`MODEL_FILES`), by their path in it."""
    return sorted({p.relative_to(folder).as_posix() for pattern in MODEL_FILES for p in folder.glob(pattern)
                   if p.is_file()})


def weights_digest(folder: Path) -> str:
    """sha256 (16 hex digits) of the files of a checkpoint folder that decide its outputs (`digested_files`:
    weights, config, code, templates, tokenizer, processor and generation configs), by path in the folder and
    content; remembered per file size and modification time in this process."""
    files = [(name, folder / name) for name in digested_files(folder)]
    return _digest(tuple((name, str(path), path.stat().st_size, path.stat().st_mtime_ns) for name, path in files))


@functools.cache
def _digest(files: tuple[tuple[str, str, int, int], ...]) -> str:
    digest = hashlib.sha256()
    for name, path, _, _ in files:
        with open(path, "rb") as fh:
            digest.update(name.encode() + b"\0" + hashlib.file_digest(fh, "sha256").digest())
    return digest.hexdigest()[:16]


def tokenizer_files(folder: Path) -> list[str]:
    """The tokenizer files present in `folder` (`TOKENIZER_FILES`)."""
    return sorted({p.name for pattern in TOKENIZER_FILES for p in folder.glob(pattern) if p.is_file()})


def snapshot_commit(folder: Path) -> str | None:
    """The commit of a hub snapshot folder (`.../snapshots/<40 hex>`), else None."""
    name = folder.name
    is_commit = len(name) == 40 and all(c in "0123456789abcdef" for c in name)
    return name if folder.parent.name == "snapshots" and is_commit else None


def hub_snapshot(name: str, repo_id: str, revision: str | None, patterns: list[str],
                 settings: tuple[str, str, str] = ("model.model_id", "model.revision", "model.local_path")) -> Path:
    """A hub checkpoint's snapshot folder, from the local cache (fetched unless HF_HUB_OFFLINE is set); one
    `RunnerError` saying what to do when it is not there or the hub will not give it. `settings`: the config keys
    that name it (its id, its revision, a local folder instead)."""
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import LocalEntryNotFoundError, RepositoryNotFoundError, RevisionNotFoundError

    from facet_probe.runners.base import RunnerError

    try:
        return Path(snapshot_download(repo_id, revision=revision, allow_patterns=patterns))
    except LocalEntryNotFoundError as exc:
        raise RunnerError(not_in_cache_message(name, repo_id, revision, exc, settings[2])) from exc
    except (RepositoryNotFoundError, RevisionNotFoundError) as exc:  # gated (a subclass), misspelt, private
        raise RunnerError(hub_refused_message(name, repo_id, revision, exc, settings)) from exc


def download_command(model_id: str, revision: str | None) -> str:
    """`hf download <id> [--revision <rev>]`: what fetches a hub checkpoint at the configured revision."""
    return f"hf download {model_id}{f' --revision {revision}' if revision else ''}"


def not_in_cache_message(name: str, model_id: str, revision: str | None, exc: BaseException,
                         local_key: str = "model.local_path") -> str:
    """Why a hub checkpoint could not be found, blaming HF_HUB_OFFLINE only when it is set."""
    from huggingface_hub import constants

    where = f"{model_id}@{revision or 'main'}"
    if constants.HF_HUB_OFFLINE:
        why = "downloads are off (HF_HUB_OFFLINE is set)"
    else:
        cause = str(exc.__cause__ or exc.__context__ or exc).strip().splitlines()
        why = f"the hub could not be reached or refused it ({cause[0][:160] if cause else type(exc).__name__})"
    return (f"{name}: {where} is not in the local Hugging Face cache ({constants.HF_HUB_CACHE}) and {why}. "
            f"Download it first ({download_command(model_id, revision)}), "
            f"or set {local_key} to a folder holding it.")


def hub_refused_message(name: str, repo_id: str, revision: str | None, exc: BaseException,
                        settings: tuple[str, str, str]) -> str:
    """Why the hub would not give a checkpoint (`GatedRepoError`, `RepositoryNotFoundError`, `RevisionNotFoundError`
    from huggingface_hub), in the hub's own words, and what to do."""
    from huggingface_hub import constants
    from huggingface_hub.errors import GatedRepoError, RevisionNotFoundError

    id_key, revision_key, local_key = settings
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    said = (getattr(exc, "server_message", None) or (lines[-1] if lines else type(exc).__name__)).strip()
    login = "log in here (hf auth login, or set HF_TOKEN to a token of that account)"
    if isinstance(exc, GatedRepoError):
        return (f"{name}: {repo_id} is gated on the Hugging Face hub (the hub said: {said}). Accept its licence at "
                f"{constants.ENDPOINT}/{repo_id} while logged in there, then {login} and re-run; or set {local_key} "
                "to a folder holding it.")
    if isinstance(exc, RevisionNotFoundError):
        return (f"{name}: {repo_id} has no revision {revision!r} on the Hugging Face hub (the hub said: {said}); "
                f"check {revision_key} (a branch, tag or commit of {constants.ENDPOINT}/{repo_id}).")
    return (f"{name}: the Hugging Face hub has no model {repo_id} (the hub said: {said}); check {id_key} (owner/name "
            f"as on the model's hub page); a private model needs a login: {login}.")
