"""Old module paths (before the layout of issue 41) keep working for one release: each imports the
module at its new path, the very same object, with a DeprecationWarning that names the new path;
an old module whose name is now a package re-exports what the module exported."""

import importlib
import sys
import warnings

import pytest

from gptask._moved import MOVED


@pytest.mark.parametrize("old", sorted(MOVED))
def test_an_old_path_is_the_new_module_with_a_warning(old):
    new = MOVED[old]
    try:
        module = importlib.import_module(new)
    except ImportError as exc:  # an optional dependency (torch) absent here
        pytest.skip(str(exc))
    sys.modules.pop(old, None)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        alias = importlib.import_module(old)
    if hasattr(module, "__path__"):  # an old package forwards its names to the new one
        assert all(getattr(alias, name) is getattr(module, name) for name in getattr(module, "__all__", []))
    else:
        assert alias is module
    assert any(issubclass(w.category, DeprecationWarning) and new in str(w.message) for w in caught), old


@pytest.mark.parametrize("package, names", [("gptask.space", ["Real", "Space", "choice_text"]),
                                            ("gptask.problem", ["Problem", "Features", "CostModel"]),
                                            ("gptask.sources", ["Source", "SourceError"]),
                                            ("gptask.cli", ["main", "parse_assignments"])])
def test_an_old_module_now_a_package_keeps_its_names(package, names):
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        module = importlib.import_module(package)
    for name in names:
        assert getattr(module, name) is getattr(importlib.import_module(f"{package}.{_leaf(package)}"), name)


def _leaf(package):
    return {"gptask.space": "dimensions", "gptask.problem": "definition", "gptask.sources": "multisource",
            "gptask.cli": "main"}[package]


def test_old_and_new_paths_share_classes():
    import gptask.model.numerics.lcm as new

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from gptask.models.lcm import LCM
    assert LCM is new.LCM


def test_an_old_submodule_path_leaves_the_new_packages_names_alone():
    """``gptask.importing.fit`` is a module; importing it by its old path once replaced the function
    ``gptask.sources.importing.fit`` with that module (Python sets a submodule on its parent)."""
    import gptask.sources.importing as new

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        sys.modules.pop("gptask.importing.fit", None)
        import gptask.importing.fit  # noqa: F401
    assert callable(new.fit) and new.fit.__module__ == "gptask.sources.importing.fit"
