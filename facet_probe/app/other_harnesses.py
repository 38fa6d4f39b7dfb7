"""Other harnesses' command lines (lm-evaluation-harness, lmms-eval, inspect) answered with the equivalent
`key=value` command, in one line.

`python -m facet_probe --model hf --model_args pretrained=... --tasks mmlu --limit 5` (lm-eval, lmms-eval) or
`--model hf/<hub id> --limit 5 --log-dir ...` (inspect) reached Hydra's argparse, which answered with its usage and
"unrecognized arguments". `FLAGS` is the whole translation: each of their flags, as their CLIs spell it, and what
it becomes here (docs/coming_from.md maps the rest).
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass

HUB_ID = "<hub id or folder>"


def _pairs(value: str) -> dict[str, str]:
    """'a=1,b=2' (lm-eval's --model_args and --gen_kwargs) as a mapping."""
    return dict(part.partition("=")[::2] for part in value.split(",") if part.strip())


def _model(value: str) -> list[str]:
    """lm-eval's --model names a backend (hf, hf-multimodal, vllm, ...; lmms-eval: a family, llava_hf, qwen2_5_vl,
    ...): a local checkpoint here is model=hf; inspect's names provider/model (hf/<hub id>, openai/gpt-4o)."""
    provider, slash, name = value.partition("/")
    if slash and provider == "hf":
        return ["model=hf", f"model.model_id={name}"]
    if slash:
        return ["model=<a model config: python -m facet_probe --help lists them>"]
    return ["model=hf"]


#: --model_args keys (lm-eval's HFLM / lmms-eval's) that have a setting of model=hf here
MODEL_ARGS = {"pretrained": "model.model_id", "revision": "model.revision", "dtype": "model.dtype",
              "device": "model.device", "batch_size": "model.batch_size"}
#: --gen_kwargs keys and their generation setting here
GEN_KWARGS = {"max_gen_toks": "max_new_tokens", "max_new_tokens": "max_new_tokens", "temperature": "temperature",
              "top_p": "top_p", "top_k": "top_k", "repetition_penalty": "repetition_penalty"}


def _model_args(value: str) -> list[str]:
    return [f"{MODEL_ARGS[k]}={v}" for k, v in _pairs(value).items() if k in MODEL_ARGS]


def _gen_kwargs(value: str) -> list[str]:
    return [f"model.generation.{GEN_KWARGS[k]}={v}" for k, v in _pairs(value).items() if k in GEN_KWARGS]


def _unmapped(keys: dict[str, str]) -> Callable[[str], list[str]]:
    """The `key=value` pairs of a pairs flag's value that have no setting here."""
    return lambda value: [f"{k}={v}" for k, v in _pairs(value).items() if k not in keys]


def _tasks(value: str) -> list[str]:
    """lm-eval's tasks are multiple-choice datasets here, each ordered by option_order; several: a sweep."""
    return ["facet=option_order", "dataset=lm_eval", f"dataset.task={value}"]


def _count(key: str) -> Callable[[str], list[str]]:
    return lambda value: [f"{key}={value}"] if value.isdigit() else []


@dataclass(frozen=True)
class Flag:
    """One flag of theirs: its settings here (a function of its value), whether it takes a value, why it sets
    nothing here when it does not (`note`), and, for a flag of `key=value` pairs, the pairs it leaves out."""

    settings: Callable[[str], list[str]] | None = None
    takes_value: bool = True
    note: str = ""
    unmapped: Callable[[str], list[str]] | None = None


FLAGS: dict[str, Flag] = {
    "--model": Flag(_model),
    "--model_args": Flag(_model_args, unmapped=_unmapped(MODEL_ARGS)),
    "--tasks": Flag(_tasks),
    "--limit": Flag(_count("limit"), note="a fraction of a dataset has no equivalent: limit= counts items"),
    "--batch_size": Flag(_count("model.batch_size"), note="batches are halved on out-of-memory by themselves"),
    "--device": Flag(lambda v: [f"model.device={v}"]),
    "--gen_kwargs": Flag(_gen_kwargs, unmapped=_unmapped(GEN_KWARGS)),
    "--output_path": Flag(lambda v: [f"hydra.run.dir={v}"]),
    "--log_samples": Flag(takes_value=False, note="every trial is kept in the run folder's trials.jsonl"),
    "--apply_chat_template": Flag(takes_value=False, note="the checkpoint's chat template is always applied"),
    "--num_fewshot": Flag(note="the audit's prompts are zero-shot"),
    "--seed": Flag(note="seed= here draws the orderings, a quantity of its own"),
    "--trust_remote_code": Flag(takes_value=False, note="only Kimi-VL's adapter runs a checkpoint's own code"),
    # inspect
    "--log-dir": Flag(lambda v: [f"hydra.run.dir={v}"]),
    "--temperature": Flag(lambda v: [f"model.generation.temperature={v}"]),
    "--max-tokens": Flag(lambda v: [f"model.generation.max_new_tokens={v}"]),
    "--top-p": Flag(lambda v: [f"model.generation.top_p={v}"]),
    "--epochs": Flag(_count("repeats"), note="repeats= asks each ordering again"),
}


def _parsed(argv: Sequence[str]) -> tuple[list[tuple[str, str]], list[str]]:
    """([(their flag, its value)], our own arguments kept as they are)."""
    flags, kept = [], []
    args = list(argv)
    while args:
        arg = args.pop(0)
        name, eq, value = arg.partition("=")
        flag = FLAGS.get(name) if name.startswith("--") else None
        if flag is None:
            kept.append(arg)
            continue
        if flag.takes_value and not eq:
            value = args.pop(0) if args and not args[0].startswith("--") else ""
        flags.append((name, value))
    return flags, kept


def equivalent_command(argv: Sequence[str], program: str = "python -m facet_probe") -> str | None:
    """One line for a command line holding another harness's flags: the `key=value` command that does the same
    here, and what has no equivalent (docs/coming_from.md); None when it holds none."""
    flags, kept = _parsed(argv)
    if not flags:
        return None
    settings: list[str] = []
    dropped: list[str] = []
    for name, value in flags:
        flag = FLAGS[name]
        made = flag.settings(value) if flag.settings is not None and value else []
        settings += [s for s in made if s not in settings]
        if not made:
            dropped.append(f"{name} ({flag.note or 'no equivalent setting'})")
        elif flag.unmapped is not None and (left := flag.unmapped(value)):
            dropped.append(f"{name} {','.join(left)} (no equivalent setting)")
    if any(s.startswith("model=hf") for s in settings) and not any(s.startswith("model.model_id=") for s in settings):
        settings.insert(settings.index("model=hf") + 1, f"model.model_id={HUB_ID}")
    sweep = ["-m"] if any(s.startswith("dataset.task=") and "," in s for s in settings) else []
    line = (f"{program} takes key=value settings, not other harnesses' --flags; the equivalent: "
            f"{program} {shlex.join([*sweep, *settings, *kept])}")
    if dropped:
        line += f"; not carried over: {', '.join(dropped)}"
    return line + " (docs/coming_from.md)"
