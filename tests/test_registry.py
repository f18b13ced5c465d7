"""The registry, copier.yml and the template's files agree."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Callable
from typing import Any

import jinja2
import pytest
import yaml

from tests.matrix import ROOT, registry, tables
from tests.matrix import template as extension

TEMPLATE = ROOT / "template"


def copier_questions() -> dict[str, Any]:
    data = yaml.safe_load((ROOT / "copier.yml").read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return {key: value for key, value in data.items() if not key.startswith("_")}


def question_choices(name: str) -> list[tuple[str, Any]] | None:
    """The (label, value) pairs question *name* offers, as Copier reads them.

    A ``choices`` string is a template: Copier renders it, with the extension's
    globals, and reads the result as YAML.
    """
    choices = copier_questions()[name].get("choices")
    if isinstance(choices, str):
        environment = jinja2.Environment(extensions=[extension.NamingFilters])
        choices = yaml.safe_load(environment.from_string(choices).render())
    if choices is None:
        return None
    if isinstance(choices, dict):
        return list(choices.items())
    return [(str(c[0]), c[1]) if isinstance(c, list) else (str(c), c) for c in choices]


def test_registry_is_consistent() -> None:
    assert registry.check_registry() == []


def test_copier_choices_come_from_the_registry() -> None:
    assert question_choices("resources") == [(r.title, r.key) for r in registry.RESOURCES]
    choices = copier_questions()["resources"]["choices"]
    assert isinstance(choices, str), "copier.yml must render the choices from the registry"


@pytest.mark.parametrize(
    "broken",
    [
        dict(overhead=(0, 10, "1.000")),
        dict(overhead=(10, 10, "1.0")),
        dict(exports=()),
        dict(module="testing"),
    ],
    ids=["zero-ns", "ratio-digits", "no-exports", "core-module"],
)
def test_check_registry_refuses_a_broken_entry(broken: dict[str, Any]) -> None:
    fields: dict[str, Any] = {
        "key": "mmap",
        "title": "Memory maps (map and descriptor closed together)",
        "module": "mmaps",
        "exports": ("ManagedMap",),
        "async_exports": (),
        "summary": "A memory map that refuses to leak its file descriptor.",
        "overhead": (100, 110, "1.100"),
    }
    sound = registry.Resource(**fields)
    assert registry.check_registry((*registry.RESOURCES, sound)) == []
    entry = registry.Resource(**(fields | broken))
    assert registry.check_registry((*registry.RESOURCES, entry)) != []


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
def test_each_resource_has_its_benchmark_scenario(
    resource: registry.Resource,
) -> None:
    benchmark = (TEMPLATE / "benchmarks" / "overhead.py.jinja").read_text(encoding="utf-8")
    assert f"if '{resource.key}' in resources %}}" in benchmark
    assert f'yield "{resource.key}", ' in benchmark, (
        f"benchmarks/overhead.py.jinja has no scenario for {resource.key!r}"
    )
    assert f"\ndef _{resource.key}(workdir: Path) -> Iterator[Scenario]:\n" in benchmark, (
        f"_scenarios() calls _{resource.key}(workdir): benchmarks/overhead.py.jinja lacks it"
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
    assert tables.readme_text(readme) == readme, (
        "README.md's lists of resources are stale: run python -m extensions.tables --write"
    )
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
    message = extension.resources_answer_problem("[file, redis]")
    assert f"\n{message}\n" in readme, "README.md quotes the message the template prints"


def test_readme_generation_refuses_a_readme_without_its_lists() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    with pytest.raises(ValueError, match="the Resources table"):
        tables.readme_text(readme.replace("| Key | Module | Classes |", "| Key |"))


@pytest.mark.slow
def test_template_code_passes_its_own_lint_and_types(
    run_tool: Callable[..., subprocess.CompletedProcess[str]],
) -> None:
    run_tool(ROOT, "ruff", "check", "--no-cache", ".")
    run_tool(ROOT, "ruff", "format", "--no-cache", "--check", ".")
    run_tool(ROOT, "mypy", "--no-incremental")


ADDING = ROOT / "docs" / "adding-a-resource.md"


def _adding_a_resource_rows() -> list[tuple[str, bool]]:
    """The (file, optional) rows of docs/adding-a-resource.md's table."""
    text = ADDING.read_text(encoding="utf-8")
    rows = re.findall(r"^\| \d+ \| `([^`]+)` \| (.*) \|$", text, flags=re.MULTILINE)
    return [(name, what.startswith("optional")) for name, what in rows]


def _for(resource: registry.Resource, name: str) -> str:
    return name.replace("KEY", resource.key).replace("MODULE", resource.module)


def test_adding_a_resource_lists_at_most_six_required_files() -> None:
    required = [name for name, optional in _adding_a_resource_rows() if not optional]
    assert len(required) <= 7, required  # six, and the benchmark's scenario (issue 25)
    text = ADDING.read_text(encoding="utf-8")
    assert f"touches {len(required)} files" in text, "the page states the count"


@pytest.mark.parametrize("resource", registry.RESOURCES, ids=lambda r: r.key)
def test_adding_a_resource_lists_only_files_that_exist(resource: registry.Resource) -> None:
    """Each row names a file that every resource has (or, optional, that exists)."""
    for name, optional in _adding_a_resource_rows():
        path = ROOT / _for(resource, name)
        assert path.is_file() or (optional and (ROOT / name).is_file()), name


@pytest.mark.parametrize("resource", registry.RESOURCES, ids=lambda r: r.key)
def test_adding_a_resource_names_every_file(resource: registry.Resource) -> None:
    """Every file that mentions a resource is one docs/adding-a-resource.md lists.

    README.md's generated lines do not count: ``extensions/tables.py`` writes them
    from the registry (``test_readme_lists_every_resource`` checks they are fresh).
    """
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
        if name == "README.md":
            text = tables.readme_text(text, ())
        # Other modules may name a class in an example; only a condition counts there.
        named = not name.startswith("template/src/") and any(
            re.search(rf"\b{export}\b", text) for export in names
        )
        if condition in name or condition in text or named:
            touching.add(
                name.replace(f"'{resource.key}'", "'KEY'").replace(resource.module, "MODULE")
            )
    assert touching <= {name for name, _ in _adding_a_resource_rows()}
