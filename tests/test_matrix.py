"""Every combination of answers renders a project that passes its own tool chain.

The tests of one combination share a render (one xdist group).  Each check reads
only what it depends on; ``tests/matrix.py`` says what that is.
"""

from __future__ import annotations

import re
import shutil
from typing import TYPE_CHECKING

import pytest
import yaml

from tests.matrix import (
    AUDITED_FILES,
    FORMATTED,
    PACKAGE,
    RUNTIME_DIR,
    SOURCES,
    TEMPLATE_RUNTIME,
    ZIZMOR_AUDITED,
    Combination,
    audit_keys,
    docs_link_forms_problems,
    docs_page_keys,
    expected_files,
    give_distinct_mtimes,
    import_purity_problems,
    init_problems,
    jinja_leftovers,
    keys_of_test_files,
    mypy_keys_settled,
    project_files,
    pytest_arguments,
    reduce_docs_tree,
    ruff_keys,
    runtime_files,
)

if TYPE_CHECKING:
    import subprocess
    from collections.abc import Callable
    from pathlib import Path

    from tests.matrix import CheckLedger

    Render = Callable[[Combination], Path]
    RunTool = Callable[..., subprocess.CompletedProcess[str]]

pytestmark = pytest.mark.slow


def test_render_is_complete_and_clean(combo: Combination, render: Render) -> None:
    project = render(combo)
    files = project_files(project)
    assert sorted(files - expected_files(combo)) == [], "unexpected files"
    assert sorted(expected_files(combo) - files) == [], "missing files"
    assert jinja_leftovers(project) == []
    answers = yaml.safe_load((project / ".copier-answers.yml").read_text(encoding="utf-8"))
    expected = combo.answers()
    assert {key: answers.get(key) for key in expected} == expected
    assert answers["_src_path"]
    for text_file in files:
        data = (project / text_file).read_bytes()
        if not data:
            continue  # py.typed is an empty marker
        assert data.endswith(b"\n"), f"{text_file} does not end with a newline"
        assert not data.endswith(b"\n\n"), f"{text_file} ends with blank lines"


def test_modules_are_import_pure(combo: Combination, render: Render) -> None:
    """The premise of keying test files by the modules they import (tests/matrix.py)."""
    project = render(combo)
    src = project / "src" / PACKAGE
    assert init_problems(src / "__init__.py") == []
    # The package's own modules only: the runtime is part of every test file's key
    # (runtime_digest), so what importing it does needs no premise; it registers
    # its fork hook (_resource) when imported.
    problems = [p for module in sorted(src.glob("*.py")) for p in import_purity_problems(module)]
    assert problems == []


def test_runtime_is_shipped_verbatim(combo: Combination, render: Render) -> None:
    """Every render's runtime is the template's, file for file and byte for byte.

    What the template checks of the runtime itself (``tests/test_runtime.py``) holds in every
    project, and no answer changes a line of it.
    """
    project = render(combo)
    assert runtime_files(project / RUNTIME_DIR) == runtime_files(TEMPLATE_RUNTIME)


def test_lint_and_format(
    combo: Combination, render: Render, run_tool: RunTool, ledger: CheckLedger
) -> None:
    """``ruff check`` and ``ruff format --check`` on every file whose key is new."""
    project = render(combo)
    keys = ruff_keys(project)
    pending = sorted(name for name, key in keys.items() if not ledger.passed("ruff", key))
    if not pending:
        return
    linted = [name for name in pending if name.endswith(SOURCES) or name == "pyproject.toml"]
    if linted:
        run_tool(project, "ruff", "check", "--no-cache", *linted)
    formatted = [name for name in pending if name.endswith(FORMATTED)]
    if formatted:
        run_tool(project, "ruff", "format", "--no-cache", "--check", *formatted)
    for name in pending:
        ledger.record("ruff", keys[name])


def test_types_strict(
    combo: Combination,
    render: Render,
    run_preloaded: RunTool,
    ledger: CheckLedger,
    mypy_caches: Callable[[Combination], Path],
) -> None:
    """``mypy --strict`` once per distinct set of inputs (``mypy_key``, ``mypy_keys_settled``)."""
    project = render(combo)
    settled = mypy_keys_settled(project)  # its own key first
    if ledger.passed("mypy", settled[0]):
        return
    give_distinct_mtimes(project)
    run_preloaded(project, "mypy", "--cache-dir", str(mypy_caches(combo)))
    for key in settled:
        ledger.record("mypy", key)


def test_own_test_suite(
    combo: Combination,
    render: Render,
    run_preloaded: RunTool,
    ledger: CheckLedger,
    suite_python: Callable[[Combination, Path], Path],
) -> None:
    if combo.python is None:
        pytest.skip(f"Python {combo.python_min} is not installed: checked statically only")
    project = render(combo)
    python = suite_python(combo, project)
    # A test file's outcome depends on its inputs and on the interpreter's version.
    check = f"pytest-{combo.python_min}"
    keys = keys_of_test_files(project)
    pending = sorted(name for name, key in keys.items() if not ledger.passed(check, key))
    if not pending:
        return  # every test file ran, with these exact inputs, in another combination
    tests = pytest_arguments(pending)
    run_preloaded(project, "pytest", "-p", "no:cacheprovider", "-q", *tests, python=python)
    for name in pending:
        ledger.record(check, keys[name])


ZENSICAL_SAYS_DONE = re.compile(r"Build started|Build finished in [0-9.]+m?s|No issues found")
"""The lines of a clean ``zensical build``; anything else it prints is a finding."""


def test_docs_build_strict(
    combo: Combination, render: Render, run_preloaded: RunTool, ledger: CheckLedger
) -> None:
    if not combo.docs:
        pytest.skip("docs not chosen")
    project = render(combo)
    nav_pages = set(re.findall(r":\s*(\S+\.md)\s*$", (project / "mkdocs.yml").read_text(), re.M))
    pages = {p.relative_to(project / "docs").as_posix() for p in (project / "docs").rglob("*.md")}
    assert nav_pages == pages, "mkdocs.yml nav and docs/ disagree"
    index = (project / "docs" / "index.md").read_text(encoding="utf-8")
    for target in re.findall(r"\]\(([^)#:]+\.md)\)", index):
        assert target in pages, f"index.md links to missing {target}"
    assert docs_link_forms_problems(project) == []
    keys = docs_page_keys(project)
    pending = {page for page, key in keys.items() if not ledger.passed("docs", key)}
    if not pending:
        return
    # zensical writes site/ and .cache/ beside mkdocs.yml: build a copy of the project,
    # with the pages already checked (by their keys) stubbed out.
    site = project.parent / f"{project.name}-site"
    shutil.rmtree(site, ignore_errors=True)  # the folder of a combination before
    shutil.copytree(project, site)
    kept = reduce_docs_tree(site, pending)
    built = run_preloaded(site, "zensical", "build", "--strict")
    # --strict fails on broken links only; docstring (griffe) warnings are just printed.
    findings = [
        line for line in built.stdout.splitlines() if not ZENSICAL_SAYS_DONE.fullmatch(line)
    ]
    assert findings == []
    for page in kept:
        ledger.record("docs", keys[page])


def test_github_files_pass_audit_and_schema(
    combo: Combination, render: Render, run_tool: RunTool, ledger: CheckLedger
) -> None:
    """zizmor (offline, default persona: no finding at all), the GitHub schemas, prek.

    ``prek validate-config`` checks the hook config as prek reads it; running the
    hooks needs their repositories from GitHub, which this machine cannot reach.

    Keyed by each file's bytes (``audit_keys``): the workflows vary only with the
    Python floor and the docs answer, so each distinct file is checked once.
    """
    project = render(combo)
    keys = audit_keys(project)
    pending = sorted(name for name, key in keys.items() if not ledger.passed("audit", key))
    if not pending:
        return
    audited = [name for name in pending if name.startswith(ZIZMOR_AUDITED)]
    if audited:
        run_tool(project, "zizmor", "--offline", "--no-config", "--no-progress", *audited)
    if ".pre-commit-config.yaml" in pending:
        run_tool(project, "prek", "validate-config", ".pre-commit-config.yaml")
    schemas = {AUDITED_FILES[name] for name in pending} - {None}
    for schema in sorted(s for s in schemas if s is not None):
        files = [name for name in pending if AUDITED_FILES[name] == schema]
        run_tool(project, "check-jsonschema", "--builtin-schema", schema, *files)
    for name in pending:
        ledger.record("audit", keys[name])
