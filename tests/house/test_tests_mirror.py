"""tests/ mirrors the package: a folder per subpackage, each test module named after a module that exists in it, so
a reader finds a module's tests where the module is (and a test named after a removed module cannot stay)."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TESTS = ROOT / "tests"
#: Folders of tests that are not one module's: whole apps end to end, the house rules, out-of-tree plug-ins, fixtures.
NOT_A_MIRROR = {"e2e", "house", "plugins", "fixtures"}
#: Where a mirror folder's package may live: the package, or the development package (`tests/tiny_vlm`).
PACKAGES = (ROOT / "facet_probe", ROOT / "facet_probe_dev")


def module_names(package: Path) -> set[str]:
    """The names a test module in the package's mirror folder may start with: the package's own name and every
    module and subpackage under it."""
    names = {package.name}
    for path in package.rglob("*"):
        if "__pycache__" in path.parts or path.name.startswith("_"):
            continue
        if path.suffix == ".py" or (path.is_dir() and any(path.glob("*.py"))):
            names.add(path.stem)
    return names


def misplaced(tests: Path = TESTS, packages: tuple[Path, ...] = PACKAGES) -> list[str]:
    """Each test module that is not where its module's mirror puts it, with why."""
    found = []
    for test in sorted(tests.rglob("test_*.py")):
        rel = test.relative_to(tests)
        if rel.parts[0] in NOT_A_MIRROR or "__pycache__" in rel.parts:
            continue
        named = test.stem.removeprefix("test_")
        folder = rel.parent
        package = next((root / folder for root in packages if (root / folder).is_dir()), None)
        if folder == Path("."):
            if not (packages[0] / f"{named}.py").is_file():
                found.append(f"{rel}: at the root of tests/, where only the package's root modules' tests live")
        elif package is None:
            found.append(f"{rel}: tests/{folder} mirrors no subpackage of facet_probe")
        elif not any(named == name or named.startswith(f"{name}_") for name in module_names(package)):
            found.append(f"{rel}: named after no module of {package.parent.name}/{folder}")
    return found


def test_every_test_module_sits_in_its_subpackage_s_folder_named_after_a_module():
    assert misplaced() == []


def test_the_rule_sees_a_root_test_an_unknown_folder_and_a_removed_module(tmp_path):
    package = tmp_path / "facet_probe"
    (package / "store").mkdir(parents=True)
    (package / "store" / "reading.py").write_text("")
    (package / "api.py").write_text("")
    tests = tmp_path / "tests"
    for name in ("test_api.py", "test_trial_io.py", "store/test_reading_shards.py", "store/test_trial_io.py",
                 "nowhere/test_reading.py", "e2e/test_anything.py"):
        (tests / name).parent.mkdir(parents=True, exist_ok=True)
        (tests / name).write_text("")
    assert [line.split(":")[0] for line in misplaced(tests, (package,))] == [
        "nowhere/test_reading.py", "store/test_trial_io.py", "test_trial_io.py"]
