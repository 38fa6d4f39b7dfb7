from __future__ import annotations

from pathlib import Path

import pytest
import torch

from facet_probe_dev.testing import tiny_vlm_pool
from facet_probe_dev.testing.tiny_models import built_once
from facet_probe_dev.tiny_vlm.architecture import TinyVLMSpec, build_processor
from facet_probe_dev.tiny_vlm.data import Pool, available_sets, tokenizer_corpus
from facet_probe_dev.tiny_vlm.tokenizer import option_markers, prompt_phrases, train_tokenizer


@pytest.fixture(autouse=True)
def _one_thread():
    """Tiny models on a loaded machine: one intra-op thread (see shared/README)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def pool(run_shared: Path) -> Pool:
    """Eight train items of every synthetic set (shared, read-only; through the memo the tiny runs of
    `cached_items` load from). Generating them takes about 5 s: the items are made once per test run, whichever
    xdist worker asks first, and the other reads them (`built_once`)."""
    def generate(folder: Path) -> None:
        with pytest.MonkeyPatch.context() as patch:
            tiny_vlm_pool.install(patch)
            Pool.load(available_sets(), n_per_set=8)
        folder.mkdir(parents=True)
        tiny_vlm_pool.save(folder / "items.pkl")

    tiny_vlm_pool.remember(built_once(run_shared / "tiny_vlm_items", generate, done="items.pkl") / "items.pkl")
    with pytest.MonkeyPatch.context() as patch:
        tiny_vlm_pool.install(patch)
        return Pool.load(available_sets(), n_per_set=8)


@pytest.fixture(scope="session")
def processor(pool):
    """The tiny VLM's processor over a small tokenizer (vocab 600) trained on the pool (read-only)."""
    tok = train_tokenizer(tokenizer_corpus(pool, seed=0), vocab_size=600, phrases=prompt_phrases() + option_markers())
    return build_processor(TinyVLMSpec(), tok)


@pytest.fixture
def cached_items(monkeypatch):
    """Every tiny run's `Pool.load` from one memo of the items (tiny_vlm_pool.py): generating them costs more
    than the run's steps; the items are the same, and so is the training."""
    tiny_vlm_pool.install(monkeypatch)
