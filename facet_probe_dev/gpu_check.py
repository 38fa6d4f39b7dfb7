"""`make gpu-check` (`python -m facet_probe_dev.gpu_check`): the checks to run the day a GPU is lent, one table.

Builds a tiny random copy of each HF family in its hub layout on the spot (`facet_probe_dev.testing`'s builders;
no network) and, per family, through the panel's own model config pointed at the copy: one short audit with
images (in-process, `facet_probe.api.audit`), batched against serial greedy generation in bf16 (answers
differing, within `TOLERANCE`), NF4 through bitsandbytes, FlashAttention-2 where flash-attn is installed, vLLM's
offline engine (`fallback: refuse`) where vLLM is installed, the placement decision, and trials/s serial and
batched. Without CUDA it runs what a CPU can (copies, audits, bf16 comparison, NF4 on bitsandbytes' CPU path,
placement on simulated GPUs) and each skipped row says why. Exit 1 when a row fails. See docs/hf_models.md.

    python -m facet_probe_dev.gpu_check [--families llava gemma3] [--trials 32] [--out gpu_check.md]
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
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import date
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the check never downloads
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import pandas as pd  # noqa: E402
import torch  # noqa: E402
from hydra.utils import instantiate  # noqa: E402
from omegaconf import OmegaConf  # noqa: E402

import facet_probe  # noqa: E402
from facet_probe import api  # noqa: E402
from facet_probe.report.markdown import md_table  # noqa: E402
from facet_probe.runners.base import generate_all  # noqa: E402
from facet_probe.runners.hf import placement  # noqa: E402
from facet_probe.runners.vllm_engine import VLLMRunner, vllm_version  # noqa: E402
from facet_probe_dev.testing.tiny_models import image_requests, tiny_model_path  # noqa: E402

CONF = Path(facet_probe.__file__).parent / "conf" / "model"
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
        gpu = f", {torch.cuda.get_device_name(0)} x{torch.cuda.device_count()}" if self.cuda else ", no GPU"
        return (f"{platform.node()} ({platform.machine()}, {os.cpu_count()} CPUs{gpu}); torch {torch.__version__}, "
                f"flash-attn {'yes' if self.flash_attn else 'no'}, vLLM {self.vllm or 'not installed'}")


@dataclass(frozen=True)
class Row:
    family: str
    check: str
    result: str  # ok | FAIL | skipped
    detail: str
    seconds: float = 0.0


class Skip(Exception):  # noqa: N818 - a check's outcome, not an error
    """A check that cannot run on this machine; the message says why."""


def _fail_if(bad: bool, detail: str) -> str:
    if bad:
        raise AssertionError(detail)
    return detail


def checked(family: str, check: str, body: Callable[[], str]) -> Row:
    """Run one check: its detail line, or why it was skipped, or what failed (the run goes on either way)."""
    t0 = time.perf_counter()
    try:
        detail, result = body(), "ok"
    except Skip as why:
        detail, result = str(why), "skipped"
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
    """One short audit with images through `facet_probe.api.audit`, on CUDA where there is one."""
    run = root / "audit" / config
    api.audit([f"hydra.run.dir={run}", f"model={config}", f"model.local_path={folder}", "model.quantization=off",
               f"model.generation.max_new_tokens={MAX_NEW_TOKENS}", "facet=option_order",
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


def check_batching(family: str, config: str, folder: Path, n: int, state: dict) -> Iterator[Row]:
    """Batched against serial greedy generation in bf16 (answers differing, `TOLERANCE`), and their trials/s;
    `state` keeps the loaded batched runner and its answers (`reference`) for the rows after it."""

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
                        f"attn {batched.provenance['attn_implementation']}")

    def throughput() -> str:
        if "batched" not in state:
            raise Skip("the bf16 comparison did not run")
        s, b = state["serial"][1], state["batched"][1]
        return f"serial {s:.1f} trials/s, batched ({BATCH_SIZE}) {b:.1f} trials/s ({b / s:.1f}x), bf16"

    yield checked(family, "batched vs serial, bf16", compare)
    yield checked(family, "throughput", throughput)


def check_nf4(config: str, folder: Path, n: int, reference: dict[str, str]) -> str:
    """The config quantised to NF4 (double quantisation, bf16 compute) loads and answers every trial."""
    import importlib.util

    if importlib.util.find_spec("bitsandbytes") is None:
        raise Skip("bitsandbytes not installed")
    with contextlib.closing(hf_runner(config, folder, dtype="bfloat16", batch_size=BATCH_SIZE,
                                      quantization="require")) as runner:
        got, rate, errors = answers(runner, requests(n))
    _fail_if(errors or runner.provenance["quantization"] != "nf4",
             f"{errors} errors, quantisation {runner.provenance['quantization']}")
    return (f"{n} trials, 0 errors, {rate:.1f} trials/s on {runner.provenance['device']}; "
            f"{differing(got, reference)} / {n} answers differ from bf16 (expected: other weights)")


def check_placement(family: str, config: str, folder: Path, runner) -> Iterator[Row]:
    """`placement.place`: the decision on the visible GPUs (CUDA), and on three simulated GPUs too small for the
    model alone, where it must shard over two (bf16 and NF4: an NF4 map at 4-bit sizes, issue 41 point 4)."""

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
            raise Skip("no CUDA: the decision on real GPUs needs one (simulated rows above)")
        decision, _ = placement.place(runner, placement.visible_gpus())
        return decision.reason

    yield checked(family, "placement, simulated (bf16)", lambda: simulated("off"))
    yield checked(family, "placement, simulated (NF4)", lambda: simulated("nf4"))
    yield checked(family, "placement, visible GPUs", visible)


def check_flash(config: str, folder: Path, env: Env, state: dict, n: int) -> str:
    """FlashAttention-2 asked for explicitly (`require`): it loads, passes its first forward and answers."""
    if not env.cuda:
        raise Skip("no CUDA")
    if not env.flash_attn:
        raise Skip("flash-attn not installed (pip install 'facet_probe[flash]')")
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


def check_vllm(config: str, folder: Path, env: Env, reference: dict[str, str], n: int) -> str:
    """vLLM's offline engine on the copy, `fallback: refuse` (so an HF answer can never pass for vLLM's)."""
    if not (CONF / f"vllm_{config}.yaml").is_file():
        raise Skip(f"no vllm_{config} config (not served by vLLM here; docs/hf_models.md)")
    if env.vllm is None:
        raise Skip("vLLM not installed (its own venv: pip install 'facet_probe[vllm]')")
    if not env.cuda:
        raise Skip("no CUDA")
    hf = instantiate(OmegaConf.load(CONF / f"{config}.yaml"), local_path=str(folder), quantization="off",
                     generation={"max_new_tokens": MAX_NEW_TOKENS, "min_new_tokens": MAX_NEW_TOKENS})
    with contextlib.closing(VLLMRunner(name=f"vllm_{config}", hf=hf, fallback="refuse",
                                       engine_args=VLLM_ENGINE_ARGS)) as runner:
        runner.check_ready()
        got, rate, errors = answers(runner, requests(n))
    _fail_if(errors or runner.engine != "vllm", f"{errors} errors, engine {runner.engine}")
    return f"vLLM {env.vllm} {VLLM_ENGINE_ARGS}, {rate:.1f} trials/s, {differing(got, reference)} / {n} answers differ from HF bf16"


def check_family(family: str, root: Path, env: Env, n: int) -> list[Row]:
    """Every check of one tiny family, in table order."""
    config = PANEL_CONFIG[family]
    label = f"{family} ({config})"
    built: dict[str, Path] = {}

    def build() -> str:
        built["folder"] = tiny_model_path(family, root / "models")
        return f"tiny copy in its hub layout: {', '.join(sorted(p.name for p in built['folder'].iterdir()))}"

    rows = [checked(label, "tiny copy", build)]
    if "folder" not in built:
        return rows
    folder = built["folder"]
    rows.append(checked(label, f"audit with images ({env.device})", lambda: check_audit(config, folder, root, env)))
    state: dict = {"reference": {}, "runner": None}
    rows.extend(check_batching(label, config, folder, n, state))
    reference = state["reference"]
    rows.extend(check_placement(label, config, folder, state["runner"]))
    rows.append(checked(label, "NF4 (bitsandbytes)", lambda: check_nf4(config, folder, n, reference)))
    rows.append(checked(label, "FlashAttention-2", lambda: check_flash(config, folder, env, state, n)))
    if state["runner"] is not None:
        state["runner"].close()
    rows.append(checked(label, "vLLM engine (fallback refuse)", lambda: check_vllm(config, folder, env, reference, n)))
    return rows


def run_checks(families: list[str], n: int, root: Path, env: Env) -> pd.DataFrame:
    """The table: one row per family and check, then one per panel config with no tiny copy."""
    rows: list[Row] = []
    for family in families:
        rows.extend(check_family(family, root, env, n))
    rows.extend(Row(config, "all", "skipped", why) for config, why in NO_COPY.items())
    return pd.DataFrame([r.__dict__ for r in rows])


@contextlib.contextmanager
def workspace(keep: Path | None) -> Iterator[Path]:
    if keep is not None:
        keep.mkdir(parents=True, exist_ok=True)
        yield keep
    else:
        with tempfile.TemporaryDirectory(prefix="gpu_check_") as tmp:
            yield Path(tmp)


def markdown(table: pd.DataFrame, env: Env, seconds: float) -> str:
    return (f"gpu-check {date.today().isoformat()} on {env.machine()}; {seconds:.0f} s\n\n{md_table(table, 1)}\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m facet_probe_dev.gpu_check", description=__doc__.splitlines()[0])
    parser.add_argument("--families", nargs="+", choices=sorted(PANEL_CONFIG), default=sorted(PANEL_CONFIG),
                        help="tiny families to check (default: every one a panel config runs)")
    parser.add_argument("--trials", type=int, default=None,
                        help="trials per comparison (default: 64 on CUDA, 16 on CPU)")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (1: safest on a loaded machine)")
    parser.add_argument("--out", type=Path, default=None, help="also write the table as markdown to this file")
    parser.add_argument("--work", type=Path, default=None, help="keep the copies and audits here (default: a temp dir)")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    env = Env.here()
    n = args.trials or (64 if env.cuda else 16)
    t0 = time.perf_counter()
    with workspace(args.work) as root:
        table = run_checks(args.families, n, root, env)
    text = markdown(table, env, time.perf_counter() - t0)
    print(text)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text)
    return 1 if (table["result"] == "FAIL").any() else 0


if __name__ == "__main__":
    sys.exit(main())
