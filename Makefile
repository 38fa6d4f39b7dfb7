# facet_probe developer targets. `make setup` once, then `make demo` / `make test`.
PY ?= .venv/bin/python
export TOKENIZERS_PARALLELISM := false
# the paper targets, read from facet_probe/paper/targets.py (TARGETS): `make table1 INPUT=<run folders>`
PAPER_TARGETS := $(shell $(PY) -c "from facet_probe.paper.targets import TARGETS; print(' '.join(TARGETS))" 2>/dev/null)
INPUT ?= outputs
OUT ?= outputs/paper
OFFLINE ?= outputs/paper-offline

.PHONY: setup test test-fast architecture demo attack-demo lint typecheck bench tiny-vlm clean-outputs paper paper-offline rehearsal gpu-check gpu-check-quick $(PAPER_TARGETS)

setup:            ## create .venv with the CPU/CUDA torch pin and the project (editable, with dev tools)
	python3 -m venv .venv && .venv/bin/pip install -q --upgrade pip && .venv/bin/pip install "torch==2.13.0" -e ".[dev]"

test:             ## the test suite (what CI runs)
	$(PY) -m pytest -n 2 -q

test-fast:        ## the inner loop: every test not marked slow (no real processes, trainings or long fits)
	$(PY) -m pytest -n 2 -q -m "not slow"

demo:             ## the offline default audit (embedded model on the synthetic datasets)
	$(PY) -m facet_probe

architecture:     ## the module map of docs/architecture.md, rendered from the code
	$(PY) -m facet_probe_dev.layout

lint:             ## ruff
	$(PY) -m ruff check facet_probe tests benchmarks experiments

typecheck:        ## mypy over the package (pyproject.toml's [tool.mypy]; CI runs it in tests/house/test_typecheck.py)
	$(PY) -m mypy

bench:            ## every benchmark script; each prints its figures
	@set -e; for b in benchmarks/bench_*.py; do echo "== $$b"; $(PY) $$b; done

clean-outputs:
	rm -rf outputs/*/ multirun/

tiny-vlm:         ## retrain the embedded tiny VLM (CPU, two processes, about 15 minutes; never run by CI) into facet_probe/assets/tiny_vlm
	$(PY) -m facet_probe_dev.tiny_vlm.train

attack-demo:      ## adversarial CoT attacks on the tiny VLM (docs/attacks.md)
	$(PY) -m facet_probe.attack limit=8

paper:            ## every paper table and figure from INPUT's run folders (docs/paper.md) into OUT
	$(PY) -m facet_probe.paper input=$(INPUT) out=$(OUT)

$(PAPER_TARGETS): ## one paper target: make table1 INPUT=<run folders>
	$(PY) -m facet_probe.paper target=$@ input=$(INPUT) out=$(OUT)

rehearsal:        ## the dress rehearsal of both papers: every app joined on one machine (API panel and judges on the loopback fake provider, plug-ins from a user folder), then the joins checked (docs/rehearsal.md)
	$(PY) -m facet_probe_dev.rehearsal --scale full --out outputs/rehearsal

gpu-check:        ## tiny copies of every HF family checked on this machine's GPU (audit, bf16 batching, NF4, FlashAttention-2, vLLM, placement, trials/s); one table in outputs/gpu_check/, CPU part without CUDA (docs/hf_models.md)
	$(PY) -m facet_probe_dev.gpu_check --out outputs/gpu_check

gpu-check-quick:  ## the same for a short lease: under 6 minutes on one GPU, the machine's own torch and transformers (docs/hf_models.md, "First GPU run")
	$(PY) -m facet_probe_dev.gpu_check --quick --out outputs/gpu_check

paper-offline:    ## the offline inputs (tiny VLM + reference policies, a short decoder grid, CoT x order, ODI smoke, prompt mitigations, calibration on a stating reference policy, a short attack grid) and every target
	$(PY) -m facet_probe -m model=tiny_vlm,oracle,position_biased,seeded_random progress=false hydra.sweep.dir=$(OFFLINE)/runs
	$(PY) -m facet_probe -m experiment=decoder_grid limit=40 progress=false hydra.sweep.dir=$(OFFLINE)/decoder
	$(PY) -m facet_probe.decoder input=$(OFFLINE)/decoder out=$(OFFLINE)/decoder/decoder_noise
	$(PY) -m facet_probe -m facet=option_order dataset=synthetic_mcq limit=50 prompt.cot=true,false progress=false hydra.sweep.dir=$(OFFLINE)/cot
	$(PY) -m facet_probe.odi input=$(OFFLINE)/runs odi=smoke out=$(OFFLINE)/odi
	$(PY) -m facet_probe.paper "input=[$(OFFLINE)/runs,$(OFFLINE)/odi]" "mechanism.judges=[]" out=$(OFFLINE)/paper
	$(PY) -m facet_probe.paper target=table-decoder input=$(OFFLINE)/decoder out=$(OFFLINE)/paper
	$(PY) -m facet_probe.paper target=table-cot-order input=$(OFFLINE)/cot out=$(OFFLINE)/paper
	$(PY) -m facet_probe -m experiment=prompt_mitigation limit=20 progress=false hydra.sweep.dir=$(OFFLINE)/mitigation
	$(PY) -m facet_probe.paper target=table-prompt-mitigation input=$(OFFLINE)/mitigation out=$(OFFLINE)/paper
	$(PY) -m facet_probe model=always_first_stating prompt.calibration=true limit=50 progress=false hydra.run.dir=$(OFFLINE)/calibration
	$(PY) -m facet_probe.paper target=table-calibration input=$(OFFLINE)/calibration out=$(OFFLINE)/paper
	$(PY) -m facet_probe.attack -m limit=8 attack.steps=20 out_root=$(OFFLINE)
	$(PY) -m facet_probe.paper target=attack-tables input=$(OFFLINE)/attack out=$(OFFLINE)/paper
