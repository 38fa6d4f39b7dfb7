# facet_probe developer targets. `make setup` once, then `make demo` / `make test`.
PY ?= .venv/bin/python
export TOKENIZERS_PARALLELISM := false

.PHONY: setup test demo attack-demo lint bench tiny-vlm clean-outputs

setup:            ## create .venv with the CPU/CUDA torch pin and the project (editable, with dev tools)
	python3 -m venv .venv && .venv/bin/pip install -q --upgrade pip && .venv/bin/pip install "torch==2.13.0" -e ".[dev]"

test:             ## the test suite (what CI runs)
	$(PY) -m pytest -n 2 -q

demo:             ## the offline default audit (embedded model on the synthetic datasets)
	$(PY) -m facet_probe

lint:             ## ruff
	$(PY) -m ruff check facet_probe tests benchmarks experiments

bench:            ## every benchmark script; each prints its figures
	@set -e; for b in benchmarks/bench_*.py; do echo "== $$b"; $(PY) $$b; done

clean-outputs:
	rm -rf outputs/*/ multirun/

tiny-vlm:         ## retrain the embedded tiny VLM (CPU, two processes, about 15 minutes; never run by CI) into facet_probe/assets/tiny_vlm
	$(PY) -m facet_probe.tiny_vlm.train

attack-demo:      ## adversarial CoT attacks on the tiny VLM (docs/attacks.md)
	$(PY) -m facet_probe.attack limit=8
