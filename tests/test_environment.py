"""This environment has what the generated projects ask for, so the matrix tests it."""

from __future__ import annotations

import tomllib
from importlib.metadata import PackageNotFoundError, distribution, version
from typing import TYPE_CHECKING

import pytest
from packaging.requirements import Requirement

from tests.matrix import Combination, registry
from tests.preloaded import GENERATED_PYTEST_PLUGINS

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path


@pytest.mark.parametrize("group", ["dev", "docs"])
def test_generated_dependency_groups_are_satisfied_here(
    render: Callable[[Combination], Path], group: str
) -> None:
    # Every resource: a resource's libraries are dependencies only when it is chosen.
    everything = tuple(resource.key for resource in registry.RESOURCES)
    project = render(Combination(everything, async_support=True, docs=True))
    pyproject = tomllib.loads((project / "pyproject.toml").read_text(encoding="utf-8"))
    requirements = [Requirement(text) for text in pyproject["dependency-groups"][group]]
    if group == "dev":
        requirements += [Requirement(text) for text in pyproject["project"]["dependencies"]]
    assert requirements
    unmet = []
    for requirement in requirements:
        try:
            installed = version(requirement.name)
        except PackageNotFoundError:
            unmet.append(f"{requirement} (not installed)")
            continue
        if not requirement.specifier.contains(installed, prereleases=True):
            unmet.append(f"{requirement} (installed {installed})")
    assert unmet == []


def test_generated_dependencies_are_satisfied_here(
    render: Callable[[Combination], Path],
) -> None:
    # A resource's library (httpx for http_client) is a dependency of the projects
    # that choose it: the matrix runs their suites in this environment.
    every = tuple(resource.key for resource in registry.RESOURCES)
    project = render(Combination(every, async_support=True, docs=False))
    pyproject = tomllib.loads((project / "pyproject.toml").read_text(encoding="utf-8"))
    requirements = [Requirement(text) for text in pyproject["project"]["dependencies"]]
    assert "httpx" in {requirement.name for requirement in requirements}
    unmet = [
        f"{requirement} (installed {version(requirement.name)})"
        for requirement in requirements
        if not requirement.specifier.contains(version(requirement.name), prereleases=True)
    ]
    assert unmet == []


def test_generated_pytest_plugins_are_loaded_in_the_matrix(
    render: Callable[[Combination], Path],
) -> None:
    # tool_env() turns plugin autoloading off: each plugin of the dev group must be
    # named in GENERATED_PYTEST_PLUGINS, or its settings fail --strict-config.
    project = render(Combination(("file",), async_support=True, docs=True))
    pyproject = tomllib.loads((project / "pyproject.toml").read_text(encoding="utf-8"))
    plugins = {
        entry_point.module
        for text in pyproject["dependency-groups"]["dev"]
        for entry_point in distribution(Requirement(text).name).entry_points
        if entry_point.group == "pytest11"
    }
    assert plugins == set(GENERATED_PYTEST_PLUGINS)
