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

from tests.conftest import spent
from tests.families import in_scope
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

    from tests.conftest import HeldRenders
    from tests.families import FamilyChecks
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
    combo: Combination,
    render: HeldRenders,
    run_tool: RunTool,
    ledger: CheckLedger,
    families: FamilyChecks,
) -> None:
    """``ruff check`` and ``ruff format --check`` on every file whose key is new."""
    project = render(combo)
    pending = _ruff_pending(project, ledger)
    files = render.files(combo)
    decomposed = [name for name in pending if in_scope(name)]
    if decomposed and families.decomposes(combo, files):
        for anchor in families.anchors(combo):
            with ledger.exclusive("ruff", f"anchor-{anchor.id}"):
                held = families.hold(anchor)
                names = [name for name in _ruff_pending(held, ledger) if name in decomposed]
                _ruff(held, names, run_tool, ledger)
        _record(ledger, "ruff", ruff_keys(project), decomposed, families)
        pending = [name for name in pending if name not in decomposed]
    with families.whole(combo, files):
        _ruff(project, pending, run_tool, ledger)


def _ruff_pending(project: Path, ledger: CheckLedger) -> list[str]:
    keys = ruff_keys(project)
    return sorted(name for name, key in keys.items() if not ledger.passed("ruff", key))


def _ruff(project: Path, names: list[str], run_tool: RunTool, ledger: CheckLedger) -> None:
    """Lint and format-check *names* of *project*, and record their keys."""
    if not names:
        return
    keys = ruff_keys(project)
    linted = [name for name in names if name.endswith(SOURCES) or name == "pyproject.toml"]
    if linted:
        run_tool(project, "ruff", "check", "--no-cache", *linted)
    formatted = [name for name in names if name.endswith(FORMATTED)]
    if formatted:
        run_tool(project, "ruff", "format", "--no-cache", "--check", *formatted)
    for name in names:
        ledger.record("ruff", keys[name])


def _record(
    ledger: CheckLedger, kind: str, keys: dict[str, str], names: list[str], families: FamilyChecks
) -> None:
    """Record *names*' keys as passed by the decomposition (``tests/families.py``)."""
    for name in names:
        ledger.record(kind, keys[name])
    families.decomposed[kind] += len(names)
    with spent(f"{kind} (from the anchors)"):  # counted in the run's timings
        pass


def test_types_strict(
    combo: Combination,
    render: HeldRenders,
    run_preloaded: RunTool,
    ledger: CheckLedger,
    mypy_caches: Callable[[Combination], Path],
    families: FamilyChecks,
) -> None:
    """``mypy --strict`` once per distinct set of inputs (``mypy_key``, ``mypy_keys_settled``),
    and for a family that is a projection of its anchors, the anchors' runs."""
    project = render(combo)
    settled = mypy_keys_settled(project)  # its own key first
    if ledger.passed("mypy", settled[0]):
        return
    files = render.files(combo)
    if families.decomposes(combo, files):
        for anchor in families.anchors(combo):
            cache = mypy_caches(anchor).with_name(f"{mypy_caches(anchor).name}-anchors")
            _mypy(families.hold(anchor), run_preloaded, ledger, cache)
        _record(ledger, "mypy", {"mypy": settled[0]}, ["mypy"], families)
        for key in settled[1:]:
            ledger.record("mypy", key)
        return
    with families.whole(combo, files):
        _mypy(project, run_preloaded, ledger, mypy_caches(combo))


def _mypy(project: Path, run_preloaded: RunTool, ledger: CheckLedger, cache: Path) -> None:
    """Run mypy on *project* unless its key passed, and record what its run settles."""
    settled = mypy_keys_settled(project)
    with ledger.exclusive("mypy", settled[0]):
        if ledger.passed("mypy", settled[0]):
            return
        give_distinct_mtimes(project)
        run_preloaded(project, "mypy", "--cache-dir", str(cache))
        for key in settled:
            ledger.record("mypy", key)


def test_own_test_suite(
    combo: Combination,
    render: HeldRenders,
    run_preloaded: RunTool,
    ledger: CheckLedger,
    suite_python: Callable[[Combination, Path], Path],
    families: FamilyChecks,
) -> None:
    if combo.python is None:
        pytest.skip(f"Python {combo.python_min} is not installed: checked statically only")
    project = render(combo)
    # A test file's outcome depends on its inputs and on the interpreter's version.
    check = f"pytest-{combo.python_min}"
    pending = _pytest_pending(project, ledger, check)
    files = render.files(combo)
    decomposed = [name for name in pending if "::" not in name]  # docs pages are keyed apart
    if decomposed and families.decomposes(combo, files):
        for anchor in families.anchors(combo):
            with ledger.exclusive(check, f"anchor-{anchor.id}"):
                held = families.hold(anchor)
                names = [n for n in _pytest_pending(held, ledger, check) if n in decomposed]
                _pytest(held, names, run_preloaded, ledger, check, suite_python(anchor, held))
        _record(ledger, check, keys_of_test_files(project), decomposed, families)
        pending = [name for name in pending if name not in decomposed]
    with families.whole(combo, files):
        _pytest(project, pending, run_preloaded, ledger, check, suite_python(combo, project))


def _pytest_pending(project: Path, ledger: CheckLedger, check: str) -> list[str]:
    keys = keys_of_test_files(project)
    return sorted(name for name, key in keys.items() if not ledger.passed(check, key))


def _pytest(
    project: Path,
    names: list[str],
    run_preloaded: RunTool,
    ledger: CheckLedger,
    check: str,
    python: Path,
) -> None:
    """Run the test files (or docs pages) *names* of *project*, and record their keys."""
    if not names:
        return  # every test file ran, with these exact inputs, in another combination
    keys = keys_of_test_files(project)
    tests = pytest_arguments(names)
    # The project's settings deselect the stress tier: a run of its files alone
    # collects no test (exit status 5), which is their verdict in any run.
    stress_only = all(name.startswith("stress/") for name in names)
    arguments = ("-p", "no:cacheprovider", "-q", *tests)
    run_preloaded(
        project, "pytest", *arguments, python=python, passing=(0, 5) if stress_only else (0,)
    )
    for name in names:
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
