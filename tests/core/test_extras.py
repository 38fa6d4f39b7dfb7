"""A run that needs an extra that is not installed (`facet_probe[api]`, `[odi]`, `[quant]`) ends in ONE line naming
the pip command, exit 2, no traceback and no work done (facet_probe/core/extras.py).

Absence is simulated in this process: `sys.modules[<package>] = None` makes Python refuse `import <package>` (as
when it is not installed), and the facet_probe modules that had imported it are dropped, so the app imports them
anew and meets the refusal."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from facet_probe.core.errors import EXIT_USER_ERROR
from facet_probe.core.extras import EXTRA_MODULES, MissingExtra, check_extra, installed, require
from facet_probe_dev.testing.in_process import run_module

ROOT = Path(__file__).resolve().parents[2]
API_MODULES = ("facet_probe.runners.api.anthropic", "facet_probe.runners.api.gemini",
               "facet_probe.runners.api.openai", "facet_probe.runners.api.openai_compat",
               "facet_probe.runners.api.batch")
ODI_MODULES = ("facet_probe.odi.__main__", "facet_probe.odi.pipeline", "facet_probe.odi.recover",
               "facet_probe.odi.fit", "facet_probe.odi.model", "facet_probe.odi.centring",
               "facet_probe.odi.kernel", "facet_probe.odi.tables")


def without(monkeypatch: pytest.MonkeyPatch, package: str, dependents: tuple[str, ...] = ()) -> None:
    """As if `package` were not installed; `dependents` (facet_probe modules that import it) are imported anew
    by the app. Everything, the parent packages' attributes too, is put back after the test."""
    monkeypatch.setitem(sys.modules, package, None)
    for name in dependents:
        if name in sys.modules:
            parent, _, attr = name.rpartition(".")
            if hasattr(sys.modules.get(parent), attr):
                monkeypatch.setattr(sys.modules[parent], attr, getattr(sys.modules[parent], attr))
        monkeypatch.delitem(sys.modules, name, raising=False)


def one_line(ran) -> str:
    """The only line the app printed on stderr (no traceback), after checking it exited with 2."""
    assert ran.returncode == EXIT_USER_ERROR, ran.stderr
    assert "Traceback" not in ran.stderr, ran.stderr
    lines = ran.stderr.strip().splitlines()
    assert len(lines) == 1, ran.stderr
    return lines[0]


@pytest.mark.parametrize(("model", "package", "sdk", "settings"), [
    ("claude_sonnet_46", "anthropic", "the anthropic SDK", ()),
    ("gpt_54_mini", "openai", "the openai SDK", ()),
    ("gemini_3_flash", "google.genai", "the google-genai SDK", ()),
    ("openai_compat", "openai", "the openai SDK", ("model.model_id=m", "model.base_url=http://127.0.0.1:9/v1")),
])
def test_an_api_model_without_its_sdk_is_one_line_naming_the_api_extra(model, package, sdk, settings, tmp_path,
                                                                        monkeypatch):
    without(monkeypatch, package, API_MODULES)
    ran = run_module("facet_probe", f"model={model}", *settings, "facet=option_order", "dataset=synthetic_mcq",
                  "limit=1", "progress=false", f"hydra.run.dir={tmp_path / 'run'}", cwd=ROOT)
    assert one_line(ran) == f"error: model {model} needs {sdk}: pip install 'facet_probe[api]'"
    assert not (tmp_path / "run" / "trials").exists()  # no call planned, none made


def test_odi_without_pymc_says_so_once_before_any_work(tmp_path, monkeypatch):
    without(monkeypatch, "pymc", ODI_MODULES)
    ran = run_module("facet_probe.odi", f"input={tmp_path / 'nowhere'}", f"out={tmp_path / 'odi'}", cwd=ROOT)
    assert one_line(ran) == "error: python -m facet_probe.odi needs pymc: pip install 'facet_probe[odi]'"
    assert not (tmp_path / "odi").exists()


def test_odi_names_every_missing_package_of_its_extra(tmp_path, monkeypatch):
    without(monkeypatch, "arviz", ODI_MODULES)
    monkeypatch.setitem(sys.modules, "nutpie", None)
    ran = run_module("facet_probe.odi", f"input={tmp_path / 'nowhere'}", f"out={tmp_path / 'odi'}", cwd=ROOT)
    assert one_line(ran) == "error: python -m facet_probe.odi needs arviz, nutpie: pip install 'facet_probe[odi]'"


def test_odi_help_needs_no_extra(monkeypatch):
    """The app's help reads no PyMC: it shows without the extra (the fit's modules are imported after the check)."""
    without(monkeypatch, "pymc", ODI_MODULES)
    ran = run_module("facet_probe.odi", "--help", cwd=ROOT)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.startswith("facet-probe-odi (python -m facet_probe.odi)")


def test_nf4_without_bitsandbytes_is_one_line_naming_the_quant_extra(tmp_path, monkeypatch):
    without(monkeypatch, "bitsandbytes")
    ran = run_module("facet_probe", "model=tiny_vlm", "model.quantization=require", "facet=option_order",
                  "dataset=synthetic_mcq", "limit=1", "progress=false", f"hydra.run.dir={tmp_path / 'run'}", cwd=ROOT)
    assert one_line(ran) == ("error: quantization=require needs bitsandbytes 4-bit: bitsandbytes is not "
                             "installed (pip install 'facet_probe[quant]'). Set model.quantization=off to load "
                             "unquantised.")


def test_odi_modules_imported_without_the_extra_name_it(monkeypatch):
    """A library user importing an ODI module directly gets the same message (as a MissingExtra)."""
    without(monkeypatch, "pymc", ODI_MODULES)
    with pytest.raises(MissingExtra, match=r"^facet_probe\.odi needs pymc: pip install 'facet_probe\[odi\]'$"):
        __import__("facet_probe.odi.fit")


def test_require_names_the_absent_module_or_what_stands_for_it(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "anthropic", None)
    with pytest.raises(MissingExtra) as err:
        require("anthropic", "api", "model m", "the anthropic SDK")
    assert str(err.value) == "model m needs the anthropic SDK: pip install 'facet_probe[api]'"
    assert not installed("anthropic") and installed("json")
    # a package the required module imports is the one absent: that one is named (PyTensor's JAX link needs jax)
    (tmp_path / "fp_extras_probe.py").write_text("import fp_extras_absent_dependency\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(MissingExtra, match=r"^ODI needs fp_extras_absent_dependency: pip install 'facet_probe\[odi\]'$"):
        require("fp_extras_probe", "odi", "ODI", "the probe")
    monkeypatch.delitem(sys.modules, "fp_extras_probe", raising=False)
    with pytest.raises(MissingExtra, match=r"^ODI needs anthropic, fp_extras_absent_dependency: pip install "
                                            r"'facet_probe\[odi\]'$"):
        check_extra("odi", "ODI", ["anthropic", "json", "fp_extras_absent_dependency"])
    check_extra("odi", "ODI", ["json"])  # all there: nothing said


def test_every_runtime_extra_is_declared_and_in_all_and_dev():
    """Each extra whose modules the code names is in pyproject.toml, in `[all]` and pulled by `[dev]` (the README's
    set-up installs what the tests need); `[all]` pulls no GPU build, launcher or dev tool."""
    import tomllib

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]

    def pulled(extra: str) -> set[str]:
        """The extras `extra` pulls through `facet_probe[...]` entries, itself included, transitively."""
        out = {extra}
        for dep in extras[extra]:
            if dep.startswith("facet_probe["):
                for name in dep.split("[", 1)[1].split("]")[0].split(","):
                    out |= pulled(name.strip())
        return out

    assert set(EXTRA_MODULES) <= set(extras)
    assert set(EXTRA_MODULES) <= pulled("all") <= pulled("dev")
    assert not {"gpu", "vllm", "launchers", "dev"} & pulled("all")
