"""The API runner beside its peers at one rate-limited loopback server: the same N calls through facet_probe's
`openai_compat` audit, lm-eval's `local-chat-completions` and inspect_ai's openai provider, each a whole process
(start-up, calls, wrap-up), in alternating rounds.

The fake provider (facet_probe_dev/testing/fake_providers.py) runs in this process and answers each call after
`--latency` s, admitting at most `--rps` requests a second (token bucket of `--burst`); the others get 429 with a
Retry-After (`--form`). Per run it records every request, so the figures come from the server's side: answers
(200s), 429s, the window from the first request to the last answer and the answers per second in it as a share
of the limit, start-up (process start to first request), wrap-up (last answer to exit), and the client's CPU.
`--load N` keeps N busy processes running meanwhile (a loaded machine, reproducibly).

    python benchmarks/bench_api_peers.py --setup                 # once: a venv with lm-eval and inspect-ai (minutes)
    python benchmarks/bench_api_peers.py                         # 3 rounds of 300 calls, every installed harness
    python benchmarks/bench_api_peers.py --harnesses facet_probe --rounds 5 --load 4
    python benchmarks/bench_api_peers.py --harnesses facet_probe --baseline /tmp/base   # against another checkout

`--baseline DIR` adds `facet_probe@base`: the same audit with DIR (a checkout's root, e.g. `git archive <commit>
facet_probe | tar -x -C DIR`) first on the Python path, alternating with this checkout's.

lm-eval and inspect-ai run from `--venv` (made by `--setup`; lm-eval also from this interpreter, where the
project's `lm_eval` extra installed it); a harness found in neither is skipped with a line saying so.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # facet_probe_dev/ is in the checkout, not installed
from facet_probe_dev.testing.fake_providers import RETRY_AFTER_FORMS, FakeProviderServer  # noqa: E402

MODEL = "bench-model"
KEY = "bench-key-not-secret"
DEFAULT_VENV = ROOT / ".cache" / "bench-peers-venv"  # .cache/ is git-ignored
#: What `--setup` installs into the peers' venv (inspect's openai provider needs the openai SDK).
PEER_PACKAGES = ["lm-eval[api]>=0.4.13,<0.5", "inspect-ai", "openai"]

LM_EVAL_TASK = """\
task: fp_bench
dataset_path: json
dataset_kwargs:
  data_files: {{test: {data}}}
test_split: test
output_type: generate_until
doc_to_text: "{{{{question}}}}"
doc_to_target: "{{{{answer}}}}"
generation_kwargs:
  until: ["\\n\\n"]
  max_gen_toks: 16
  do_sample: false
metric_list:
  - metric: exact_match
"""

INSPECT_TASK = """\
from inspect_ai import Task, task
from inspect_ai.dataset import MemoryDataset, Sample
from inspect_ai.scorer import match
from inspect_ai.solver import generate


@task
def fp_bench(n: int = 300):
    samples = [Sample(input=f"Question {i}: which option? Answer with a letter.", target="A") for i in range(n)]
    return Task(dataset=MemoryDataset(samples), solver=generate(), scorer=match())
"""


@dataclass
class Harness:
    """How to run one harness for `calls` calls against `url` (the server's root), in `work` (a fresh folder)."""

    name: str
    command: Callable[[argparse.Namespace, str, Path], list[str] | None]  # None: not installed
    source: str | None = None  # a checkout whose facet_probe goes first on the Python path (--baseline)


def peer_python(args: argparse.Namespace, module: str) -> str | None:
    """The Python that has `module`: the peers' venv first, then this interpreter; None if neither has it."""
    for python in (Path(args.venv) / "bin" / "python", Path(sys.executable)):
        if python.is_file() and subprocess.run([str(python), "-c", f"import {module}"],
                                               capture_output=True).returncode == 0:
            return str(python)
    return None


def facet_probe_command(args: argparse.Namespace, url: str, work: Path) -> list[str]:
    """The audit: one cell (option_order on synthetic_mcq), K=6 orderings of calls/6 items: `calls` calls."""
    return [sys.executable, "-m", "facet_probe", "model=openai_compat", f"model.base_url={url}/v1",
            f"model.model_id={MODEL}", "facet=option_order", "dataset=synthetic_mcq", "k=6",
            f"limit={args.calls // 6}", f"hydra.run.dir={work / 'run'}", "progress=false"]


def lm_eval_command(args: argparse.Namespace, url: str, work: Path) -> list[str] | None:
    python = peer_python(args, "lm_eval")
    if python is None:
        return None
    data = work / "bench.jsonl"
    data.write_text("".join(json.dumps({"question": f"Question {i}: which option? Answer with a letter.",
                                        "answer": "A"}) + "\n" for i in range(args.calls)))
    (work / "fp_bench.yaml").write_text(LM_EVAL_TASK.format(data=json.dumps(str(data))))
    model_args = (f"model={MODEL},base_url={url}/v1/chat/completions,num_concurrent={args.peer_concurrency},"
                  "max_retries=3,tokenized_requests=False")
    return [python, "-m", "lm_eval", "--model", "local-chat-completions", "--model_args", model_args,
            "--tasks", "fp_bench", "--include_path", str(work), "--apply_chat_template",
            "--output_path", str(work / "out")]


def inspect_command(args: argparse.Namespace, url: str, work: Path) -> list[str] | None:
    python = peer_python(args, "inspect_ai")
    if python is None:
        return None
    (work / "fp_bench.py").write_text(INSPECT_TASK)
    return [python, "-m", "inspect_ai", "eval", "fp_bench.py", "-T", f"n={args.calls}",  # in cwd: inspect globs it
            "--model", f"openai/{MODEL}", "--model-base-url", f"{url}/v1",
            "--max-connections", str(args.peer_concurrency), "--max-tokens", "16", "--log-dir", str(work / "logs"),
            "--display", "none"]


HARNESSES = {h.name: h for h in (Harness("facet_probe", facet_probe_command), Harness("lm_eval", lm_eval_command),
                                 Harness("inspect_ai", inspect_command))}


def run_once(args: argparse.Namespace, harness: Harness) -> dict | None:
    """One whole process of `harness` against a fresh server; the figures, from the server's records."""
    with tempfile.TemporaryDirectory(prefix=f"bench-{harness.name}-") as tmp, \
            FakeProviderServer(latency_s=args.latency, rps_limit=args.rps, burst=args.burst,
                               retry_after_form=args.form, served_models=(MODEL,)) as server:
        work = Path(tmp)
        command = harness.command(args, server.url, work)
        if command is None:
            return None
        env = {**os.environ, **({"PYTHONPATH": harness.source} if harness.source else {}), "OPENAI_API_KEY": KEY, "HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1",
               "TOKENIZERS_PARALLELISM": "false", "INSPECT_LOG_LEVEL": "warning"}
        cpu_before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.monotonic()
        proc = subprocess.run(command, cwd=work, env=env, capture_output=True, text=True)
        ended = time.monotonic()
        cpu_after = resource.getrusage(resource.RUSAGE_CHILDREN)
        calls = list(server.calls)
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        print(f"  {harness.name}: exit code {proc.returncode}: {' | '.join(tail)}", flush=True)
    ok = [c for c in calls if c.ok]
    if not ok:
        return None
    first = min(c.arrived_at for c in calls)
    last_answer = max(c.arrived_at for c in ok) + args.latency
    window = last_answer - first
    cpu = (cpu_after.ru_utime - cpu_before.ru_utime) + (cpu_after.ru_stime - cpu_before.ru_stime)
    return {"ok": len(ok), "n429": sum(c.status == 429 for c in calls), "requests": len(calls),
            "share": len(ok) / window / args.rps, "ok_per_s": len(ok) / window, "window": window,
            "ok_per_s_whole": len(ok) / (ended - started),
            "startup": first - started, "wrapup": ended - last_answer, "wall": ended - started, "cpu": cpu,
            "cpu_ms_per_request": 1000 * cpu / len(calls)}


def setup(venv: Path) -> None:
    """Make the peers' venv and install lm-eval and inspect-ai into it (several minutes)."""
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", *PEER_PACKAGES], check=True)
    print(f"peers installed in {venv}")


def busy(n: int) -> list[subprocess.Popen]:
    """`n` processes spinning on a CPU each: a loaded machine for as long as they run."""
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]


def median(runs: list[dict], key: str) -> float:
    return statistics.median(r[key] for r in runs)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--harnesses", nargs="+", choices=sorted(HARNESSES), default=list(HARNESSES))
    ap.add_argument("--calls", type=int, default=300, help="calls per run (facet_probe: calls/6 items x K=6)")
    ap.add_argument("--rounds", type=int, default=3, help="alternating rounds (each harness once a round)")
    ap.add_argument("--rps", type=float, default=20.0, help="the server's request-per-second limit")
    ap.add_argument("--burst", type=float, default=4.0)
    ap.add_argument("--latency", type=float, default=0.2, help="seconds per answer")
    ap.add_argument("--form", default="both", choices=RETRY_AFTER_FORMS,
                    help="how a 429 says when to come back (fake_providers.RETRY_AFTER_FORMS)")
    ap.add_argument("--peer-concurrency", type=int, default=8,
                    help="lm-eval's num_concurrent and inspect's --max-connections (facet_probe adapts its own)")
    ap.add_argument("--load", type=int, default=0, help="busy processes kept running meanwhile")
    ap.add_argument("--venv", default=str(DEFAULT_VENV), help="the peers' venv (made by --setup)")
    ap.add_argument("--setup", action="store_true", help="make the peers' venv first (several minutes)")
    ap.add_argument("--baseline", help="a checkout's root: its facet_probe runs too, as facet_probe@base")
    args = ap.parse_args()
    if args.baseline:
        HARNESSES["facet_probe@base"] = Harness("facet_probe@base", facet_probe_command, str(Path(args.baseline)))
        args.harnesses = [*args.harnesses, "facet_probe@base"]
    if args.setup:
        setup(Path(args.venv))

    print(f"{args.calls} calls a run, server limit {args.rps:g} req/s (burst {args.burst:g}), {args.latency:g} s "
          f"latency, 429 form {args.form!r}, peers' concurrency {args.peer_concurrency}, load {args.load}, "
          f"{os.cpu_count()} CPUs")
    runs: dict[str, list[dict]] = {name: [] for name in args.harnesses}
    skipped: set[str] = set()
    hogs = busy(args.load)
    try:
        for round_no in range(args.rounds):
            for name in args.harnesses:
                if name in skipped:
                    continue
                result = run_once(args, HARNESSES[name])
                if result is None:
                    print(f"  {name}: not installed or no answer (python {__file__} --setup installs the peers)")
                    skipped.add(name)
                    continue
                runs[name].append(result)
                print(f"  round {round_no + 1} {name:<16} ok {result['ok']:>4}/{args.calls}  429s {result['n429']:>4}  "
                      f"share {result['share']:.3f}  start-up {result['startup']:5.2f} s  wrap-up "
                      f"{result['wrapup']:5.2f} s  wall {result['wall']:6.2f} s  CPU {result['cpu']:5.2f} s",
                      flush=True)
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()

    base = runs.get("facet_probe") or []
    print(textwrap.dedent(f"""
        medians of {args.rounds} rounds (share = answers per second from first request to last answer / limit)
        (ok/s whole: answers per second of the whole process)
        {'harness':<16} {'ok':>5} {'429s':>5} {'ok/s':>6} {'share':>6} {'start-up':>9} {'wrap-up':>8} {'wall':>7} \
{'ok/s whole':>10} {'CPU s':>6} {'CPU ms/req':>10} {'ok/s vs facet_probe':>20}"""))
    for name, results in runs.items():
        if not results:
            continue
        ratio = (median(base, "ok_per_s") / median(results, "ok_per_s")) if base else float("nan")
        print(f"{name:<16} {median(results, 'ok'):>5.0f} {median(results, 'n429'):>5.0f} "
              f"{median(results, 'ok_per_s'):>6.2f} {median(results, 'share'):>6.3f} "
              f"{median(results, 'startup'):>8.2f}s {median(results, 'wrapup'):>7.2f}s {median(results, 'wall'):>6.2f}s "
              f"{median(results, 'ok_per_s_whole'):>10.2f} "
              f"{median(results, 'cpu'):>6.2f} {median(results, 'cpu_ms_per_request'):>10.1f} "
              f"{'' if name == 'facet_probe' else f'x{ratio:.2f}':>20}")


if __name__ == "__main__":
    main()
