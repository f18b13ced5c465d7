"""Every combination of answers renders a project that passes its own tool chain.

The ``combo``, ``batch`` and ``render`` parameters come from ``tests/conftest.py``
(``pytest_generate_tests``, ``HeldRenders``), the keys from ``tests/matrix.py`` and
the anchors from ``tests/families.py``.  To follow one combination through them in
order, read docs/test-matrix.md, "One combination, start to finish".

The tests of one combination run back to back on one worker and share a render
(``matrix_scope`` in ``tests/conftest.py``).  Each check reads only what it depends
on; ``tests/matrix.py`` says what that is.
"""

from __future__ import annotations

import functools
import re
import shutil
from pathlib import Path
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
    mypy_key,
    mypy_keys_settled,
    pytest_arguments,
    reduce_docs_tree,
    ruff_keys,
    runtime_files,
)

if TYPE_CHECKING:
    import subprocess
    from collections.abc import Callable

    from tests.conftest import HeldRenders
    from tests.families import Batch, FamilyChecks
    from tests.matrix import CheckLedger, Files

    RunTool = Callable[..., subprocess.CompletedProcess[str]]

pytestmark = pytest.mark.slow


def test_render_is_complete_and_clean(combo: Combination, render: HeldRenders) -> None:
    files = render.files(combo)
    names = set(files.names())
    assert sorted(names - expected_files(combo)) == [], "unexpected files"
    assert sorted(expected_files(combo) - names) == [], "missing files"
    assert jinja_leftovers(files) == []
    answers = yaml.safe_load(files.text(".copier-answers.yml"))
    expected = combo.answers()
    assert {key: answers.get(key) for key in expected} == expected
    assert answers["_src_path"]
    for text_file in names:
        data = files.read(text_file)
        if not data:
            continue  # py.typed is an empty marker
        assert data.endswith(b"\n"), f"{text_file} does not end with a newline"
        assert not data.endswith(b"\n\n"), f"{text_file} ends with blank lines"


def test_modules_are_import_pure(combo: Combination, render: HeldRenders) -> None:
    """The premise of keying test files by the modules they import (tests/matrix.py)."""
    files = render.files(combo)
    src = f"src/{PACKAGE}"
    assert init_problems(Path(f"{src}/__init__.py"), files.read(f"{src}/__init__.py")) == []
    # The package's own modules only: the runtime is part of every test file's key
    # (runtime_digest), so what importing it does needs no premise; it registers
    # its fork hook (_resource) when imported.
    modules = [name for name in files.names(src, ".py") if name.count("/") == 2]
    problems = [p for m in modules for p in import_purity_problems(Path(m), files.read(m))]
    assert problems == []


def test_runtime_is_shipped_verbatim(combo: Combination, render: HeldRenders) -> None:
    """Every render's runtime is the template's, file for file and byte for byte.

    What the template checks of the runtime itself (``tests/test_runtime.py``) holds in every
    project, and no answer changes a line of it.
    """
    files = render.files(combo)
    shipped = {
        name.removeprefix(f"{RUNTIME_DIR}/"): files.read(name)
        for name in files.names(RUNTIME_DIR, ".py")
    }
    assert shipped == runtime_files(TEMPLATE_RUNTIME)


def test_lint_and_format(
    combo: Combination,
    render: HeldRenders,
    run_tool: RunTool,
    ledger: CheckLedger,
    families: FamilyChecks,
) -> None:
    """``ruff check`` and ``ruff format --check`` on every file whose key is new."""
    files = render.files(combo)
    pending = _ruff_pending(files, ledger)
    tree = render.tree(combo)
    decomposed = [name for name in pending if in_scope(name)]
    if decomposed and families.decomposes(combo, tree):
        for anchor in families.anchors(combo):
            if any(name in decomposed for name in _ruff_pending(families.files(anchor), ledger)):
                with ledger.exclusive("ruff", f"anchor-{anchor.id}"):
                    pending_there = _ruff_pending(families.files(anchor), ledger)
                    names = [name for name in pending_there if name in decomposed]
                    _ruff(families.hold(anchor), names, run_tool, ledger)
        _record(ledger, "ruff", ruff_keys(files), decomposed, families)
        pending = [name for name in pending if name not in decomposed]
    if pending:
        with families.whole(combo, tree):
            _ruff(render(combo), pending, run_tool, ledger)


def _ruff_pending(project: Path | Files, ledger: CheckLedger) -> list[str]:
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
    settled = mypy_keys_settled(render.files(combo))  # its own key first
    if ledger.passed("mypy", settled[0]):
        return
    tree = render.tree(combo)
    if families.decomposes(combo, tree):
        for anchor in families.anchors(combo):
            if not ledger.passed("mypy", mypy_key(families.files(anchor))):
                cache = mypy_caches(anchor).with_name(f"{mypy_caches(anchor).name}-anchors")
                _mypy(families.hold(anchor), run_preloaded, ledger, cache)
        _record(ledger, "mypy", {"mypy": settled[0]}, ["mypy"], families)
        for key in settled[1:]:
            ledger.record("mypy", key)
        return
    with families.whole(combo, tree):
        _mypy(render(combo), run_preloaded, ledger, mypy_caches(combo))


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
    # A test file's outcome depends on its inputs and on the interpreter's version.
    check = f"pytest-{combo.python_min}"
    files = render.files(combo)
    pending = _pytest_pending(files, ledger, check)
    tree = render.tree(combo)
    decomposed = [name for name in pending if "::" not in name]  # docs pages are keyed apart
    if decomposed and families.decomposes(combo, tree):
        for anchor in families.anchors(combo):
            if not any(
                n in decomposed for n in _pytest_pending(families.files(anchor), ledger, check)
            ):
                continue
            with ledger.exclusive(check, f"anchor-{anchor.id}"):
                pending_there = _pytest_pending(families.files(anchor), ledger, check)
                names = [name for name in pending_there if name in decomposed]
                if names:
                    held = families.hold(anchor)
                    python = suite_python(anchor, held)
                    _pytest(held, names, run_preloaded, ledger, check, python)
        _record(ledger, check, keys_of_test_files(files), decomposed, families)
        pending = [name for name in pending if name not in decomposed]
    if pending:
        project = render(combo)
        with families.whole(combo, tree):
            _pytest(project, pending, run_preloaded, ledger, check, suite_python(combo, project))


def _pytest_pending(project: Path | Files, ledger: CheckLedger, check: str) -> list[str]:
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
    combo: Combination, render: HeldRenders, run_preloaded: RunTool, ledger: CheckLedger
) -> None:
    if not combo.docs:
        pytest.skip("docs not chosen")
    files = render.files(combo)
    nav_pages = set(re.findall(r":\s*(\S+\.md)\s*$", files.text("mkdocs.yml"), re.M))
    pages = {name.removeprefix("docs/") for name in files.names("docs", ".md")}
    assert nav_pages == pages, "mkdocs.yml nav and docs/ disagree"
    index = files.text("docs/index.md")
    for target in re.findall(r"\]\(([^)#:]+\.md)\)", index):
        assert target in pages, f"index.md links to missing {target}"
    assert docs_link_forms_problems(files) == []
    keys = docs_page_keys(files)
    pending = {page for page, key in keys.items() if not ledger.passed("docs", key)}
    if not pending:
        return
    project = render(combo)
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
    combo: Combination, render: HeldRenders, run_tool: RunTool, ledger: CheckLedger
) -> None:
    """zizmor (offline, default persona: no finding at all), the GitHub schemas, prek.

    ``prek validate-config`` checks the hook config as prek reads it; running the
    hooks needs their repositories from GitHub, which this machine cannot reach.

    Keyed by each file's bytes (``audit_keys``): the workflows vary only with the
    Python floor and the docs answer, so each distinct file is checked once.
    """
    keys = audit_keys(render.files(combo))
    pending = sorted(name for name, key in keys.items() if not ledger.passed("audit", key))
    if not pending:
        return
    project = render(combo)
    audited = [name for name in pending if name.startswith(ZIZMOR_AUDITED)]
    if audited:
        run_tool(project, "zizmor", "--offline", "--no-config", "--no-progress", *audited)
    if ".pre-commit-config.yaml" in pending:
        run_tool(project, "prek", "validate-config", ".pre-commit-config.yaml")
    schemas = {AUDITED_FILES[name] for name in pending} - {None}
    for schema in sorted(s for s in schemas if s is not None):
        checked = [name for name in pending if AUDITED_FILES[name] == schema]
        run_tool(project, "check-jsonschema", "--builtin-schema", schema, *checked)
    for name in pending:
        ledger.record("audit", keys[name])


def test_combinations_of_a_batch(
    batch: Batch,
    render: HeldRenders,
    run_tool: RunTool,
    run_preloaded: RunTool,
    ledger: CheckLedger,
    mypy_caches: Callable[[Combination], Path],
    suite_python: Callable[[Combination, Path], Path],
    families: FamilyChecks,
) -> None:
    """Every check above, for each combination of *batch* in turn (``split_matrix``).

    A failure of one combination's check does not stop the others: the test fails
    at the end, naming each combination and check that failed.
    """
    failures: list[str] = []
    for combo in batch.combinations:
        checks: dict[str, Callable[[], None]] = {
            "render": functools.partial(test_render_is_complete_and_clean, combo, render),
            "import purity": functools.partial(test_modules_are_import_pure, combo, render),
            "runtime": functools.partial(test_runtime_is_shipped_verbatim, combo, render),
            "ruff": functools.partial(
                test_lint_and_format, combo, render, run_tool, ledger, families
            ),
            "mypy": functools.partial(
                test_types_strict, combo, render, run_preloaded, ledger, mypy_caches, families
            ),
            "pytest": functools.partial(
                test_own_test_suite, combo, render, run_preloaded, ledger, suite_python, families
            ),
            "docs": functools.partial(test_docs_build_strict, combo, render, run_preloaded, ledger),
            "audit": functools.partial(
                test_github_files_pass_audit_and_schema, combo, render, run_tool, ledger
            ),
        }
        for name, check in checks.items():
            try:
                check()
            except pytest.skip.Exception:
                continue
            except (AssertionError, pytest.fail.Exception) as failure:
                failures.append(f"{combo.id}, {name}: {failure}")
    if failures:
        pytest.fail("\n\n".join(failures), pytrace=False)
