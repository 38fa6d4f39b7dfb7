"""`make gpu-check` (`python -m facet_probe_dev.gpu_check`): the checks to run the day a GPU is lent, one table.

Builds a tiny random copy of each HF family in its hub layout on the spot (`facet_probe_dev.testing`'s builders;
no network) and, per family, through the panel's own model config pointed at the copy: one short audit with
images in bf16 (in-process, `facet_probe.api.audit`), batched against serial greedy generation in bf16 (answers
differing, within `TOLERANCE`) and their trials/s, the path Qwen3.5's linear-attention layers take, the placement
decision, NF4 through bitsandbytes, FlashAttention-2 where flash-attn is installed, vLLM's offline engine
(`fallback: refuse`) where vLLM is installed. Without CUDA it runs what a CPU can and each skipped row says why, as
does a row whose package is not installed. Exit 1 when a row fails. See docs/hf_models.md ("First GPU run").

`--quick` is the short-lease form (under 6 minutes on one H100): fewer trials, no simulated placements (CI runs
those), one vLLM engine start at most, and a time budget after which the rows not started say so. It uses the
machine's own torch and transformers; the packages it lacks arrive as wheels (`facet_probe_dev.gpu_wheels`).

    python -m facet_probe_dev.gpu_check --quick --out outputs/gpu_check [--families llava gemma3] [--trials 16]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import sys
import tempfile
import time
import tomllib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import date
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the check never downloads
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import torch  # noqa: E402
from hydra.utils import instantiate  # noqa: E402
from omegaconf import OmegaConf  # noqa: E402
from packaging.requirements import Requirement  # noqa: E402

import facet_probe  # noqa: E402
from facet_probe.core.untrusted import markdown_cell  # noqa: E402
from facet_probe.runners.base import generate_all  # noqa: E402
from facet_probe.runners.hf import placement  # noqa: E402
from facet_probe.runners.hf.linear_attention import KERNELS, importable, layer_families, paths_line  # noqa: E402
from facet_probe.runners.vllm_engine import VLLMRunner, vllm_version  # noqa: E402
from facet_probe_dev.testing.tiny_models import image_requests, tiny_model_path  # noqa: E402

CONF = Path(facet_probe.__file__).parent / "conf" / "model"
PYPROJECT = Path(facet_probe.__file__).parents[1] / "pyproject.toml"
#: tiny family (facet_probe_dev.testing.tiny_models.BUILDERS) -> the panel config whose adapter and settings it runs
#: under; Qwen2.5-VL and plain BLIP-2 copies exist for tests but no panel config runs them.
PANEL_CONFIG = {"qwen3_5": "qwen35_0_8b", "internvl": "internvl35_4b", "gemma3": "medgemma_4b",
                "llava": "llava15_7b", "idefics": "idefics_9b_instruct", "instructblip": "instructblip_vicuna_7b",
                "minigpt4": "minigpt4_vicuna_7b"}
#: panel configs with no tiny copy, and why (a row each, so the table names every family)
NO_COPY = {"kimi_vl_a3b": "its model and processor are remote code from the hub; no offline copy can be built"}
#: batched vs serial greedy answers in bf16 may differ on at most this share of trials: left padding changes the
#: bf16 rounding of attention sums, which flips near-ties (frequent on random weights, rare on real checkpoints)
TOLERANCE = 0.125
MAX_NEW_TOKENS = 8
#: a tiny engine starts quickly (no CUDA graphs) beside the HF copies still in memory
VLLM_ENGINE_ARGS = {"enforce_eager": True, "gpu_memory_utilization": 0.4}
#: each simulated GPU's free memory as a share of the model: one cannot hold it, two can
SIMULATED_FREE = 0.9
BATCH_SIZE = 8
#: trials per comparison: (CUDA, CPU), full and `--quick`
TRIALS = {False: (64, 16), True: (16, 4)}
#: `--quick`'s time budget: rows not started by then are skipped, so the check ends within a 6-minute slot
QUICK_BUDGET_S = 300


@dataclass(frozen=True)
class Env:
    """What this machine offers the checks."""

    cuda: bool
    flash_attn: bool
    vllm: str | None
    bitsandbytes: bool

    @classmethod
    def here(cls) -> Env:
        import importlib.util

        from transformers.utils import is_flash_attn_2_available

        return cls(cuda=torch.cuda.is_available(), flash_attn=is_flash_attn_2_available(), vllm=vllm_version(),
                   bitsandbytes=importlib.util.find_spec("bitsandbytes") is not None)

    @property
    def device(self) -> str:
        return "cuda" if self.cuda else "cpu"

    def machine(self) -> str:
        import transformers

        gpu = f", {torch.cuda.get_device_name(0)} x{torch.cuda.device_count()}" if self.cuda else ", no GPU"
        return (f"{platform.node()} ({platform.machine()}, {os.cpu_count()} CPUs{gpu}); "
                f"torch {torch.__version__}{supported_note('torch', torch.__version__)}, "
                f"transformers {transformers.__version__}{supported_note('transformers', transformers.__version__)}, "
                f"flash-attn {'yes' if self.flash_attn else 'no'}, vLLM {self.vllm or 'not installed'}")


def supported_note(package: str, version: str) -> str:
    """' (outside the supported <range>)' when pyproject.toml's range for `package` excludes `version`, else ''."""
    if not PYPROJECT.is_file():
        return ""
    deps = [Requirement(d) for d in tomllib.loads(PYPROJECT.read_text())["project"]["dependencies"]]
    spec = next((r.specifier for r in deps if r.name == package), None)
    if spec is None or spec.contains(version.split("+", 1)[0], prereleases=True):
        return ""
    return f" (outside the supported {spec}: rows may fail for that reason)"


@dataclass(frozen=True)
class Row:
    family: str
    check: str
    result: str  # ok | FAIL | skipped
    detail: str
    seconds: float = 0.0


class Skip(Exception):  # noqa: N818 - a check's outcome, not an error
    """A check that cannot run on this machine; the message says why."""


@dataclass
class Session:
    """One run of the check: the machine, the trials per comparison, the work folder, the mode and its deadline."""

    env: Env
    n: int
    root: Path
    quick: bool = False
    deadline: float | None = None  # time.perf_counter() after which no check starts
    vllm_started: str | None = None  # the family whose vLLM engine ran (`--quick` starts one at most)

    def checked(self, family: str, check: str, body: Callable[[], str]) -> Row:
        """`checked`, or a skipped row once the time budget is spent."""
        if self.deadline is not None and time.perf_counter() > self.deadline:
            return Row(family, check, "skipped", "the time budget (--budget) ran out before this check")
        return checked(family, check, body)


def _fail_if(bad: bool, detail: str) -> str:
    if bad:
        raise AssertionError(detail)
    return detail


def checked(family: str, check: str, body: Callable[[], str]) -> Row:
    """Run one check: its detail line, or why it was skipped (no such device, a package not installed here), or
    what failed (the run goes on either way)."""
    t0 = time.perf_counter()
    try:
        detail, result = body(), "ok"
    except Skip as why:
        detail, result = str(why), "skipped"
    except ModuleNotFoundError as exc:  # a package the machine lacks: its wheel did not come (gpu_wheels)
        detail, result = f"{exc.name} is not installed here (python -m facet_probe_dev.gpu_wheels)", "skipped"
    except Exception as exc:  # a check's failure is its row, not the end of the check
        detail, result = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:300], "FAIL"
    return Row(family, check, result, detail, round(time.perf_counter() - t0, 1))


# --- the runners and the trials --------------------------------------------------------------------------------

def hf_runner(config: str, folder: Path, **overrides):
    """The panel config's HF runner on the tiny copy, loaded (device auto: the GPU placement on CUDA, else CPU)."""
    settings = {"local_path": str(folder), "quantization": "off",
                "generation": {"max_new_tokens": MAX_NEW_TOKENS, "min_new_tokens": MAX_NEW_TOKENS}, **overrides}
    runner = instantiate(OmegaConf.load(CONF / f"{config}.yaml"), **settings)
    runner.check_ready()
    return runner


def requests(n: int):
    """`n` one-image trials of varied prompt lengths and image sizes (the batching benchmark's)."""
    return image_requests(n)


def answers(runner, reqs) -> tuple[dict[str, str], float, int]:
    """(answers by key, trials/s, errors) of one pass over `reqs`."""
    t0 = time.perf_counter()
    out = generate_all(runner, reqs)
    rate = len(reqs) / (time.perf_counter() - t0)
    return {k: r.text for k, r in out.items()}, rate, sum(r.error is not None for r in out.values())


def differing(a: dict[str, str], b: dict[str, str]) -> int:
    return sum(a[k] != b.get(k) for k in a)


# --- the checks ------------------------------------------------------------------------------------------------

def check_audit(config: str, folder: Path, root: Path, env: Env) -> str:
    """One short audit with images in bf16 through `facet_probe.api.audit`, on CUDA where there is one."""
    # the whole app (pandas, pyarrow, ...), imported here: a machine without it skips only this row
    from facet_probe import api

    run = root / "audit" / config
    api.audit([f"hydra.run.dir={run}", f"model={config}", f"model.local_path={folder}", "model.quantization=off",
               "model.dtype=bfloat16", f"model.generation.max_new_tokens={MAX_NEW_TOKENS}", "facet=option_order",
               "dataset=synthetic_visual_mcq", "limit=2", "k=2", "progress=false", "bootstrap=10"])
    trials = [json.loads(line) for line in (run / "trials.jsonl").read_text().splitlines() if line.strip()]
    errors = [t["error"] for t in trials if t.get("error")]
    prov = trials[0]["provenance"] if trials else {}
    images = [len(t["provenance"].get("image_tokens") or []) for t in trials]
    _fail_if(not trials or errors, f"{len(trials)} trials, errors: {errors[:1]}")
    _fail_if(min(images) < 1, f"a trial saw no image: image tokens {images}")
    _fail_if(env.cuda and not str(prov.get("device", "")).startswith("cuda"), f"ran on {prov.get('device')}")
    return (f"{len(trials)} trials, 0 errors, {min(images)} image(s) each, {prov.get('device')}, "
            f"{prov.get('dtype')}, attn {prov.get('attn_implementation')}")


def check_batching(s: Session, family: str, config: str, folder: Path, state: dict) -> Iterator[Row]:
    """Batched against serial greedy generation in bf16 (answers differing, `TOLERANCE`), and their trials/s;
    `state` keeps the loaded batched runner and its answers (`reference`) for the rows after it."""
    n = s.n

    def compare() -> str:
        reqs = requests(n)
        serial = hf_runner(config, folder, dtype="bfloat16", batch_size=1)
        batched = hf_runner(config, folder, dtype="bfloat16", batch_size=BATCH_SIZE)
        answers(serial, reqs[:2]), answers(batched, reqs[:2])  # warm-up: first-call allocations, lazy imports
        state["serial"], state["batched"] = answers(serial, reqs), answers(batched, reqs)
        serial.close()
        state["runner"], state["reference"] = batched, state["batched"][0]
        diff = differing(state["serial"][0], state["batched"][0])
        errors = state["serial"][2] + state["batched"][2]
        allowed = int(TOLERANCE * n)
        return _fail_if(errors or diff > allowed,
                        f"{diff} / {n} answers differ (tolerance {allowed}, {TOLERANCE:.1%}), {errors} errors, "
                        f"batch 1 vs {BATCH_SIZE}, {MAX_NEW_TOKENS} new tokens, "
                        f"attn {batched.provenance['attn_implementation']}, {batched.provenance['device']}")

    def throughput() -> str:
        if "batched" not in state:
            raise Skip("the bf16 comparison did not run")
        s_rate, b_rate = state["serial"][1], state["batched"][1]
        return (f"serial {s_rate:.1f} trials/s, batched ({BATCH_SIZE}) {b_rate:.1f} trials/s "
                f"({b_rate / s_rate:.1f}x), bf16")

    yield s.checked(family, "batched vs serial, bf16", compare)
    yield s.checked(family, "throughput", throughput)


def check_linear_attention(runner) -> str:
    """The path each linear-attention layer family of the loaded model takes (`runners/hf/linear_attention.py`)."""
    said = paths_line(layer_families(runner.model), {k.module: importable(k.module) for k in KERNELS})
    return said[0].removeprefix("linear-attention layers: ")


def check_placement(s: Session, family: str, config: str, folder: Path, runner) -> Iterator[Row]:
    """`placement.place`: the decision on the visible GPUs (CUDA); in the full check also on three simulated GPUs
    too small for the model alone, where it must shard over two (bf16 and NF4: an NF4 map at 4-bit sizes)."""

    def simulated(quantization: str) -> str:
        if runner is None:
            raise Skip("the bf16 runner did not load")
        probe = runner if quantization == "off" else hf_runner(config, folder, dtype="bfloat16", quantization="require",
                                                               device="cpu")
        empty = placement.empty_model(probe, torch.bfloat16) if quantization != "off" else None
        need = placement.loaded_bytes(empty) if empty else placement.weights_bytes(folder, "bfloat16")
        # 90% free each: one GPU cannot hold it, two can (a tiny copy's decoder layer is ~28% of it, and
        # accelerate keeps the largest layer's room free on all but the last GPU)
        gpus = [placement.Gpu(i, 4 * need, int(need * SIMULATED_FREE)) for i in range(3)]
        decision, device_map = placement.place(probe, gpus, placement.PlacementConfig(headroom=1.0))
        used = sorted({d for d in device_map.values()})
        label = "bf16" if quantization == "off" else quantization
        _fail_if(not decision.sharded or used != [0, 1], f"{label} placed on {used}: {decision.reason}")
        return (f"{label}, {need / 2**20:.2f} MiB, 3 simulated GPUs with {SIMULATED_FREE:.0%} of it free each: "
                f"sharded over GPUs {used}, {len(device_map)} modules mapped")

    def visible() -> str:
        if not torch.cuda.is_available():
            raise Skip("no CUDA: the decision on real GPUs needs one" + ("" if s.quick else " (simulated rows above)"))
        if runner is None:
            raise Skip("the bf16 runner did not load")
        decision, _ = placement.place(runner, placement.visible_gpus())
        return f"{decision.reason}; the bf16 runner ran on {runner.provenance.get('device')}"

    if not s.quick:
        yield s.checked(family, "placement, simulated (bf16)", lambda: simulated("off"))
        yield s.checked(family, "placement, simulated (NF4)", lambda: simulated("nf4"))
    yield s.checked(family, "placement, visible GPUs", visible)


def check_nf4(config: str, folder: Path, n: int, reference: dict[str, str]) -> str:
    """The config quantised to NF4 (double quantisation, bf16 compute) loads and answers every trial."""
    import importlib.util

    if importlib.util.find_spec("bitsandbytes") is None:
        raise Skip("bitsandbytes not installed (pip install 'facet_probe[quant]', or its wheel: gpu_wheels)")
    with contextlib.closing(hf_runner(config, folder, dtype="bfloat16", batch_size=BATCH_SIZE,
                                      quantization="require")) as runner:
        got, rate, errors = answers(runner, requests(n))
    _fail_if(errors or runner.provenance["quantization"] != "nf4",
             f"{errors} errors, quantisation {runner.provenance['quantization']}")
    return (f"{n} trials, 0 errors, {rate:.1f} trials/s on {runner.provenance['device']}; "
            f"{differing(got, reference)} / {n} answers differ from bf16 (expected: other weights)")


def check_flash(config: str, folder: Path, env: Env, state: dict, n: int) -> str:
    """FlashAttention-2 asked for explicitly (`require`): it loads, passes its first forward and answers."""
    from facet_probe.core.extras import pip_install_against_torch

    if not env.cuda:
        raise Skip("no CUDA")
    if not env.flash_attn:
        raise Skip(f"flash-attn not installed (after torch, on this machine: {pip_install_against_torch('flash-attn')})")
    model_class = type(getattr(state["runner"], "model", None))
    if state["runner"] is not None and not getattr(model_class, "_supports_flash_attn", True):
        raise Skip(f"transformers' {model_class.__name__} has no FlashAttention-2 path")
    reference = state["reference"]
    with contextlib.closing(hf_runner(config, folder, dtype="bfloat16", batch_size=BATCH_SIZE,
                                      attn_implementation="require")) as runner:
        got, rate, errors = answers(runner, requests(n))
    _fail_if(errors, f"{errors} errors")
    return (f"{runner.provenance['attn_implementation']}, {rate:.1f} trials/s, {differing(got, reference)} / {n} "
            "answers differ from sdpa (kernel rounding)")


def check_vllm(s: Session, family: str, config: str, folder: Path, reference: dict[str, str]) -> str:
    """vLLM's offline engine on the copy, `fallback: refuse` (so an HF answer can never pass for vLLM's); `--quick`
    starts one engine at most (each start takes about a minute)."""
    env, n = s.env, s.n
    if not (CONF / f"vllm_{config}.yaml").is_file():
        raise Skip(f"no vllm_{config} config (not served by vLLM here; docs/hf_models.md)")
    if env.vllm is None:
        raise Skip("vLLM not installed (it runs from a venv of its own: docs/hf_models.md, \"vLLM\")")
    if not env.cuda:
        raise Skip("no CUDA")
    if s.quick and s.vllm_started is not None:
        raise Skip(f"--quick starts one vLLM engine ({s.vllm_started}'s)")
    s.vllm_started = family
    hf = instantiate(OmegaConf.load(CONF / f"{config}.yaml"), local_path=str(folder), quantization="off",
                     dtype="bfloat16", generation={"max_new_tokens": MAX_NEW_TOKENS, "min_new_tokens": MAX_NEW_TOKENS})
    with contextlib.closing(VLLMRunner(name=f"vllm_{config}", hf=hf, fallback="refuse",
                                       engine_args=VLLM_ENGINE_ARGS)) as runner:
        runner.check_ready()
        got, rate, errors = answers(runner, requests(n))
    _fail_if(errors or runner.engine != "vllm", f"{errors} errors, engine {runner.engine}")
    return f"vLLM {env.vllm} {VLLM_ENGINE_ARGS}, {rate:.1f} trials/s, {differing(got, reference)} / {n} answers differ from HF bf16"


def check_family(s: Session, family: str) -> list[Row]:
    """Every check of one tiny family, in table order."""
    config = PANEL_CONFIG[family]
    label = f"{family} ({config})"
    built: dict[str, Path] = {}

    def build() -> str:
        built["folder"] = tiny_model_path(family, s.root / "models")
        return f"tiny copy in its hub layout: {', '.join(sorted(p.name for p in built['folder'].iterdir()))}"

    rows = [s.checked(label, "tiny copy", build)]
    if "folder" not in built:
        return rows
    folder = built["folder"]
    rows.append(s.checked(label, f"audit with images, bf16 ({s.env.device})",
                          lambda: check_audit(config, folder, s.root, s.env)))
    state: dict = {"reference": {}, "runner": None}
    rows.extend(check_batching(s, label, config, folder, state))
    reference, runner = state["reference"], state["runner"]
    if runner is not None and layer_families(runner.model):
        rows.append(s.checked(label, "linear-attention kernels", lambda: check_linear_attention(runner)))
    rows.extend(check_placement(s, label, config, folder, runner))
    rows.append(s.checked(label, "NF4 (bitsandbytes)", lambda: check_nf4(config, folder, s.n, reference)))
    rows.append(s.checked(label, "FlashAttention-2", lambda: check_flash(config, folder, s.env, state, s.n)))
    if runner is not None:
        runner.close()
    rows.append(s.checked(label, "vLLM engine (fallback refuse)",
                          lambda: check_vllm(s, family, config, folder, reference)))
    return rows


def run_checks(s: Session, families: list[str]) -> list[Row]:
    """The table's rows: per family and check, then one per panel config with no tiny copy."""
    rows: list[Row] = []
    for family in families:
        rows.extend(check_family(s, family))
    rows.extend(Row(config, "all", "skipped", why) for config, why in NO_COPY.items())
    return rows


@contextlib.contextmanager
def workspace(keep: Path | None) -> Iterator[Path]:
    if keep is not None:
        keep.mkdir(parents=True, exist_ok=True)
        yield keep
    else:
        with tempfile.TemporaryDirectory(prefix="gpu_check_") as tmp:
            yield Path(tmp)


def markdown(rows: list[Row], env: Env, seconds: float, quick: bool) -> str:
    """The header line (date, machine, versions, mode, time) and the table (cells shown as written)."""
    head = ["family", "check", "result", "detail", "seconds"]
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    lines += ["| " + " | ".join(markdown_cell(getattr(r, h)) for h in head) + " |" for r in rows]
    mode = "--quick" if quick else "full"
    return f"gpu-check {mode} {date.today().isoformat()} on {env.machine()}; {seconds:.0f} s\n\n" + "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m facet_probe_dev.gpu_check", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help=f"the short-lease form: fewer trials, no simulated placements, one vLLM engine, a "
                             f"{QUICK_BUDGET_S} s budget")
    parser.add_argument("--families", nargs="+", choices=sorted(PANEL_CONFIG), default=sorted(PANEL_CONFIG),
                        help="tiny families to check (default: every one a panel config runs)")
    parser.add_argument("--trials", type=int, default=None,
                        help="trials per comparison (default: 64 on CUDA, 16 on CPU; --quick: 16 and 4)")
    parser.add_argument("--budget", type=float, default=None,
                        help=f"seconds after which no check starts (default: {QUICK_BUDGET_S} with --quick, else none)")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (1: safest on a loaded machine)")
    parser.add_argument("--out", type=Path, default=None, help="also write the table to <folder>/gpu_check.md")
    parser.add_argument("--work", type=Path, default=None, help="keep the copies and audits here (default: a temp dir)")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    env = Env.here()
    t0 = time.perf_counter()
    budget = args.budget if args.budget is not None else (QUICK_BUDGET_S if args.quick else None)
    with workspace(args.work) as root:
        session = Session(env, args.trials or TRIALS[args.quick][0 if env.cuda else 1], root, args.quick,
                          None if budget is None else t0 + budget)
        rows = run_checks(session, args.families)
    text = markdown(rows, env, time.perf_counter() - t0, args.quick)
    print(text)
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "gpu_check.md").write_text(text)
    return 1 if any(r.result == "FAIL" for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
