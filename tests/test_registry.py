"""The registry, copier.yml and the template's files agree."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Callable
from typing import Any

import pytest
import yaml

from tests.matrix import ROOT, registry

TEMPLATE = ROOT / "template"


def copier_questions() -> dict[str, Any]:
    data = yaml.safe_load((ROOT / "copier.yml").read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return {key: value for key, value in data.items() if not key.startswith("_")}


def test_registry_is_consistent() -> None:
    assert registry.check_registry() == []


def test_copier_choices_match_the_registry() -> None:
    choices = copier_questions()["resources"]["choices"]
    assert list(choices.values()) == [r.key for r in registry.RESOURCES]
    assert list(choices) == [r.title for r in registry.RESOURCES]


@pytest.mark.parametrize("resource", registry.RESOURCES, ids=lambda r: r.key)
def test_each_resource_has_its_four_templates(resource: registry.Resource) -> None:
    condition = f"{{% if '{resource.key}' in resources %}}"
    expected = [
        TEMPLATE
        / "src"
        / "{{ package_name }}"
        / f"{condition}{resource.module}.py{{% endif %}}.jinja",
        TEMPLATE / "tests" / f"{condition}test_{resource.module}.py{{% endif %}}.jinja",
        TEMPLATE
        / "tests"
        / "{% if resources %}stress{% endif %}"
        / f"{condition}test_{resource.module}.py{{% endif %}}.jinja",
        TEMPLATE
        / "{% if docs %}docs{% endif %}"
        / "resources"
        / f"{condition}{resource.module}.md{{% endif %}}.jinja",
    ]
    missing = [str(path.relative_to(ROOT)) for path in expected if not path.is_file()]
    assert missing == []


@pytest.mark.parametrize("resource", registry.RESOURCES, ids=lambda r: r.key)
def test_each_resource_page_has_its_api_reference(resource: registry.Resource) -> None:
    page = (
        TEMPLATE
        / "{% if docs %}docs{% endif %}"
        / "resources"
        / f"{{% if '{resource.key}' in resources %}}{resource.module}.md{{% endif %}}.jinja"
    )
    reference = f"::: {{{{ package_name }}}}.{resource.module}"
    lines = page.read_text(encoding="utf-8").splitlines()
    assert reference in lines, f"{page.name} has no line {reference!r}"


@pytest.mark.parametrize("resource", registry.RESOURCES, ids=lambda r: r.key)
def test_each_resource_has_its_benchmark_scenario_and_figures(
    resource: registry.Resource,
) -> None:
    benchmark = (TEMPLATE / "benchmarks" / "overhead.py.jinja").read_text(encoding="utf-8")
    assert f"if '{resource.key}' in resources %}}" in benchmark
    assert f'yield "{resource.key}", ' in benchmark, (
        f"benchmarks/overhead.py.jinja has no scenario for {resource.key!r}"
    )
    index = TEMPLATE / "{% if docs %}docs{% endif %}" / "index.md.jinja"
    assert f'"{resource.key}": (' in index.read_text(encoding="utf-8"), (
        f"the docs home page has no figures for {resource.key!r}: measure them with "
        "benchmarks/overhead.py in a project rendered with docs=false"
    )


def test_no_template_file_belongs_to_an_unknown_resource() -> None:
    keys = {r.key for r in registry.RESOURCES}
    mentioned = set()
    for path in TEMPLATE.rglob("*"):
        name = path.name
        if "in resources %}" in name:
            mentioned.add(name.split("'")[1])
    assert mentioned <= keys


def test_every_question_has_help() -> None:
    for name, question in copier_questions().items():
        assert question.get("help"), f"question {name!r} has no help text"


def test_interface_question_names() -> None:
    assert set(copier_questions()) >= {
        "project_name",
        "package_name",
        "description",
        "author_name",
        "author_email",
        "license",
        "python_min",
        "resources",
        "async_support",
        "docs",
    }


def test_readme_lists_every_resource() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    question = next(line for line in readme.splitlines() if line.startswith("| `resources` |"))
    choices = re.findall(r"`([a-z_]+)`", question.split("|")[2])
    assert choices == [resource.key for resource in registry.RESOURCES], (
        "the `resources` row of README.md's Questions table must list every key, in order"
    )
    for resource in registry.RESOURCES:
        row = f"| `{resource.key}` | `{resource.module}` | "
        assert row in readme, f"README.md has no row for {resource.key!r}"
        line = readme[readme.index(row) :].splitlines()[0]
        for name in resource.exports + resource.async_exports:
            assert f"`{name}`" in line


@pytest.mark.slow
def test_template_code_passes_its_own_lint_and_types(
    run_tool: Callable[..., subprocess.CompletedProcess[str]],
) -> None:
    run_tool(ROOT, "ruff", "check", "--no-cache", ".")
    run_tool(ROOT, "ruff", "format", "--no-cache", "--check", ".")
    run_tool(ROOT, "mypy", "--no-incremental")


def _listed_in_adding_a_resource() -> set[str]:
    text = (ROOT / "docs" / "adding-a-resource.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| \d+ \| `([^`]+)` \|", text, flags=re.MULTILINE)
    return set(rows)


@pytest.mark.parametrize("resource", registry.RESOURCES, ids=lambda r: r.key)
def test_adding_a_resource_names_every_file(resource: registry.Resource) -> None:
    """Every file that mentions a resource is one docs/adding-a-resource.md lists."""
    condition = f"'{resource.key}' in resources"
    names = resource.exports + resource.async_exports
    tracked = (
        subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=ROOT,
            capture_output=True,
            check=True,
        )
        .stdout.decode()
        .split("\0")
    )
    touching = set()
    for name in filter(None, tracked):
        path = ROOT / name
        if name.startswith(("docs/", "tests/")) or not path.is_file():
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        # Other modules may name a class in an example; only a condition counts there.
        named = not name.startswith("template/src/") and any(
            re.search(rf"\b{export}\b", text) for export in names
        )
        if condition in name or condition in text or named:
            touching.add(
                name.replace(f"'{resource.key}'", "'KEY'").replace(resource.module, "MODULE")
            )
    assert touching <= _listed_in_adding_a_resource()
