"""core.memory.release: glibc's malloc_trim where the C library has it, nothing where it does not."""

from __future__ import annotations

import ctypes
import platform

import pytest

from facet_probe.core import memory


@pytest.fixture(autouse=True)
def fresh_lookup():
    memory._malloc_trim.cache_clear()
    yield
    memory._malloc_trim.cache_clear()


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="malloc_trim is glibc's")
def test_on_glibc_release_calls_malloc_trim():
    trim = memory._malloc_trim()
    assert trim is not None and trim(0) in (0, 1)  # 1: memory was returned, 0: none was
    assert memory.release() is None


def test_a_c_library_without_malloc_trim_or_none_at_all_makes_release_do_nothing(monkeypatch):
    class NoTrim:  # a C library without the symbol (macOS, musl): ctypes raises AttributeError for it
        def __getattr__(self, name):
            raise AttributeError(name)

    monkeypatch.setattr(ctypes, "CDLL", lambda name: NoTrim())
    assert memory._malloc_trim() is None
    memory.release()
    memory._malloc_trim.cache_clear()

    def unloadable(name):
        raise OSError(f"{name}: cannot open shared object file")

    monkeypatch.setattr(ctypes, "CDLL", unloadable)
    assert memory._malloc_trim() is None
    memory.release()


def test_a_small_job_skips_the_walk_over_the_heap_and_a_large_one_makes_it(monkeypatch):
    calls = []
    monkeypatch.setattr(memory, "_malloc_trim", lambda: calls.append(1) or (lambda pad: 0))
    memory.release(memory.WORTH_RELEASING_ROWS - 1)
    assert calls == []
    memory.release(memory.WORTH_RELEASING_ROWS)
    memory.release()
    assert calls == [1, 1]
