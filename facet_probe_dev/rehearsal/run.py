"""The dress rehearsal: both papers' pipelines on one machine, every app joined, as a user would type them.

Each step is a command line of one of the package's console scripts (`facet-probe`, `facet-probe-judge`, ...)
or `python -m` tools, run in this process through its own entry point (the same code path as the shell, without paying
for a new interpreter per command) with its printed output kept in `<out>/logs/`. The API models and the
judges are the loopback fake provider answering through the real SDKs (`students.py`); the local models are
the tiny VLM, the reference policies and a tiny BLIP-2 copy fitted to answer; the plug-ins come from a user
folder (`plugins/`). `joins.py` then checks what one app hands to the next.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from facet_probe_dev.rehearsal.students import Classroom, Student
from facet_probe_dev.testing.fake_providers import FakeProviderServer
from facet_probe_dev.testing.in_process import run_argv

PLUGINS = Path(__file__).resolve().parent / "plugins"
#: Fake keys the SDKs send to the loopback server; `joins.no_secrets` checks none is written anywhere.
KEYS = {"OPENAI_API_KEY": "sk-rehearsal-0123456789abcdef", "GOOGLE_API_KEY": "g-rehearsal-0123456789abcdef",
        "ANTHROPIC_API_KEY": "sk-ant-rehearsal-0123456789abcdef", "LAB_API_KEY": "lab-rehearsal-0123456789abcdef"}
#: The API panel: config name -> its stand-in (the paper's model names, so Table 1 lines up with the paper's).
PANEL = {"gpt_55": Student("gpt-5.5", skill=0.8, anchoring=0.3, paraphrase=0.3),
         "gemini_31_pro": Student("gemini-3.1-pro-preview", skill=0.7, anchoring=0.5, paraphrase=0.2),
         "claude_sonnet_46": Student("claude-sonnet-4-6", skill=0.55, anchoring=0.6, paraphrase=0.4)}
OTHER_STUDENTS = (Student("gemini-3-flash-preview", skill=0.6, anchoring=0.5),  # the thinking-budget sweep
                  Student("lab-chat-1", skill=0.65, anchoring=0.4, paraphrase=0.3))  # the plug-in API model
LOCAL_MODELS = ("tiny_vlm", "oracle", "position_biased", "seeded_random")
JUDGES = ("gemini_pro", "gpt_54_mini")  # the paper's primary judge first
MECHANISM_JUDGES = ("gemini_pro", "gpt_54_mini", "claude_sonnet")


@dataclass(frozen=True)
class Scale:
    """How big a rehearsal is: items per dataset of the main panel and of the side experiments, the attack's
    samples and PGD steps, the ODI fit and the bootstrap."""

    name: str
    items: int
    side_items: int
    attack_items: int
    attack_steps: int
    odi: str
    bootstrap: int


SCALES = {"ci": Scale("ci", items=3, side_items=3, attack_items=2, attack_steps=2, odi="smoke", bootstrap=50),
          "full": Scale("full", items=60, side_items=40, attack_items=16, attack_steps=50, odi="smoke", bootstrap=1000)}


@dataclass(frozen=True)
class Command:
    """One step: a console script and its arguments (what a user would type), and a name for its log."""

    name: str
    argv: tuple[str, ...]

    def shell(self) -> str:
        return " ".join(shlex.quote(a) for a in self.argv)


@dataclass
class Outcome:
    command: Command
    exit_code: int
    seconds: float
    output: str


@dataclass
class Rehearsal:
    """What a rehearsal ran (in order) and where its outputs are."""

    out: Path
    scale: Scale
    outcomes: list[Outcome] = field(default_factory=list)

    @property
    def failed(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.exit_code != 0]


def commands(scale: Scale, out: Path, url: str, blip2: Path) -> list[Command]:
    """Every step of the rehearsal, in order (pure: the same scale and folders give the same commands)."""
    plugin_path = f"hydra.searchpath=[file://{PLUGINS / 'conf'}]"
    quiet = "progress=false"
    base_url = {"openai": f"{url}/v1", "gemini": url, "anthropic": url}
    provider = {"gpt_55": "openai", "gemini_31_pro": "gemini", "claude_sonnet_46": "anthropic"}
    runs = out / "runs"
    steps = [Command("audit-local", ("facet-probe", "-m", f"model={','.join(LOCAL_MODELS)}", f"limit={scale.items}",
                                     quiet, f"hydra.sweep.dir={runs / 'local'}"))]
    steps += [Command(f"audit-{name}", ("facet-probe", f"model={name}", f"model.base_url={base_url[provider[name]]}",
                                        f"limit={scale.items}", quiet, "budget_usd=5",
                                        f"hydra.run.dir={runs / 'api' / name}"))
              for name in PANEL]
    steps += [Command("audit-plugin-api", ("facet-probe", "model=rh_lab_chat", f"model.base_url={url}/v1",
                                           "facet=rh_caption_order", f"limit={scale.items}", quiet, plugin_path,
                                           f"hydra.run.dir={runs / 'plugin' / 'rh_lab_chat'}")),
              Command("audit-plugin-oracle", ("facet-probe", "model=oracle", "facet=rh_caption_order",
                                              f"limit={scale.items}", quiet, plugin_path,
                                              f"hydra.run.dir={runs / 'plugin' / 'oracle'}"))]
    judge_url = {"gemini_pro": url, "gpt_54_mini": f"{url}/v1"}
    steps += [Command(f"judge-{j}", ("facet-probe-judge", f"input={runs}", f"judge={j}",
                                     f"judge.runner.base_url={judge_url[j]}", "judge.gold_anchored=true"))
              for j in JUDGES]
    steps += [Command("report", ("facet-probe-report", f"input={runs}", f"out={out / 'report'}",
                                 f"bootstrap={scale.bootstrap}")),
              Command("odi", ("facet-probe-odi", f"input={runs}", f"odi={scale.odi}", f"out={out / 'odi'}")),
              Command("decoder-grid", ("facet-probe", "-m", "experiment=decoder_grid", f"limit={scale.side_items}",
                                       quiet, f"hydra.sweep.dir={out / 'decoder'}")),
              Command("decoder", ("facet-probe-decoder", f"input={out / 'decoder'}",
                                  f"out={out / 'decoder' / 'decoder_noise'}")),
              Command("cot-order", ("facet-probe", "-m", "facet=option_order", "dataset=synthetic_mcq",
                                    f"limit={scale.side_items}", "prompt.cot=true,false", quiet,
                                    f"hydra.sweep.dir={out / 'cot'}")),
              Command("prompt-mitigation", ("facet-probe", "-m", "experiment=prompt_mitigation",
                                            f"limit={scale.side_items}", quiet, f"hydra.sweep.dir={out / 'mitigation'}")),
              Command("calibration", ("facet-probe", "model=always_first_stating", "prompt.calibration=true",
                                      f"limit={scale.side_items}", quiet, f"hydra.run.dir={out / 'calibration'}")),
              Command("think-budget", ("facet-probe", "-m", "experiment=think_budget_gemini",
                                       "experiment.models=[gemini_3_flash]", "facet=option_order",
                                       "dataset=synthetic_mcq", f"limit={scale.side_items}",
                                       f"++experiment.model_settings.base_url={url}",
                                       "experiment.model_settings.generation.thinking_config.thinking_budget=1024,8192",
                                       quiet, f"hydra.sweep.dir={out / 'think'}"))]
    budget = (f"limit={scale.attack_items}", f"attack.steps={scale.attack_steps}",
              f"attack.update_every={scale.attack_steps}", f"out_root={out}")
    steps += [Command("attack-tiny-vlm", ("facet-probe-attack", "-m", *budget)),
              Command("attack-blip2", ("facet-probe-attack", "-m", "model=minigpt4_vicuna_7b",
                                       f"model.local_path={blip2}", "model.dtype=float32", "max_new_tokens=16",
                                       *budget)),
              Command("attack-plugin", ("facet-probe-attack", "attack=rh_option_margin", plugin_path, *budget)),
              Command("examples-plugin", ("python", "-m", "facet_probe.facets.examples", "rh_caption_order",
                                          plugin_path))]
    mechanism = [f"++mechanism.judge_settings.{j}.runner.base_url={judge_url.get(j, url)}" for j in MECHANISM_JUDGES]
    paper = ("facet-probe-paper", f"out={out / 'paper'}", f"bootstrap={scale.bootstrap}")
    steps += [Command("paper", (*paper, f"input=[{runs},{out / 'odi'}]", *mechanism)),
              Command("paper-decoder", (*paper, "target=table-decoder", f"input={out / 'decoder'}")),
              Command("paper-cot", (*paper, "target=table-cot-order", f"input={out / 'cot'}")),
              Command("paper-mitigation", (*paper, "target=table-prompt-mitigation", f"input={out / 'mitigation'}")),
              Command("paper-calibration", (*paper, "target=table-calibration", f"input={out / 'calibration'}")),
              Command("paper-think-budget", (*paper, "target=fig-think-budget", f"input={out / 'think'}")),
              Command("paper-attack", (*paper, "target=attack-tables", f"input={out / 'attack'}")),
              Command("paper-verify", (*paper, "target=verify"))]
    return steps


MARKER = ".rehearsal"


def rehearse(scale: Scale, out: Path, echo: bool = True, models: Path | None = None) -> Rehearsal:
    """Run every step into `out`, made afresh (an earlier rehearsal's folder is replaced, any other folder with
    files in it is refused), and return what ran. The tiny models are built in `models` (default `out/models`;
    the tests pass the folder their other tests build the same models in)."""
    fresh_folder(out)
    blip2 = fitted_blip2(models or out / "models", n=min(scale.attack_items, 4))
    result = Rehearsal(out, scale)
    classroom = Classroom([*PANEL.values(), *OTHER_STUDENTS], out)
    with _environment(), FakeProviderServer(reply=classroom) as server:
        for command in commands(scale, out, server.url, blip2):
            outcome = run_command(command, out / "logs")
            result.outcomes.append(outcome)
            if echo:
                print(f"[{outcome.seconds:6.1f}s] exit {outcome.exit_code}  {command.name}: {command.shell()}",
                      flush=True)
    return result


def fresh_folder(out: Path) -> None:
    """An empty `out` marked as a rehearsal's: the fake server's port is new each time, so an earlier rehearsal's
    runs would be refused as other settings rather than resumed."""
    if out.exists() and any(out.iterdir()):
        if not (out / MARKER).is_file():
            raise SystemExit(f"error: {out} holds files that are not a rehearsal's; give --out an empty or new folder")
        shutil.rmtree(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / MARKER).write_text("made by python -m facet_probe_dev.rehearsal; replaced by the next rehearsal\n")


def fitted_blip2(root: Path, n: int = 4) -> Path:
    """A tiny BLIP-2 (MiniGPT-4 layout) whose LM head is fitted to answer the first `n` synthetic visual items
    (the attack's samples)."""
    from facet_probe.runners.hf.blip2 import MiniGPT4Runner  # noqa: PLC0415  (torch only when the attack runs)
    from facet_probe_dev.testing.trained_tiny import train_tiny_llava  # noqa: PLC0415

    root.mkdir(parents=True, exist_ok=True)
    return train_tiny_llava(root, n=n, family="blip2", runner_cls=MiniGPT4Runner)


def run_command(command: Command, logs: Path) -> Outcome:
    """Run one command line in this process as the shell would (its argv, its exit code), keeping its output
    (the tests' harness: `facet_probe_dev.testing.in_process.run_argv`; the rehearsal's fake keys are its env)."""
    started = time.perf_counter()
    ran = run_argv(command.argv, keys=True)
    logs.mkdir(parents=True, exist_ok=True)
    text = f"$ {command.shell()}\n{ran.stdout}{ran.stderr}"
    (logs / f"{command.name}.log").write_text(text)
    return Outcome(command, ran.returncode, time.perf_counter() - started, text)


@contextlib.contextmanager
def _environment() -> Iterator[None]:
    """The fake keys, offline hubs and the plug-ins' modules on the path, for the rehearsal only."""
    saved = dict(os.environ)
    os.environ.update({**KEYS, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"})
    sys.path.insert(0, str(PLUGINS))
    try:
        yield
    finally:
        sys.path.remove(str(PLUGINS))
        os.environ.clear()
        os.environ.update(saved)
