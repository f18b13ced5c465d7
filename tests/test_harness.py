"""The premises of the matrix's shortcuts, each checked against the slow truth.

Every shortcut of the matrix (``tests/rendering.py``, ``tests/preloaded.py``, the
keys of ``tests/matrix.py``) claims to give the same verdict as the plain way of
doing the work.  These tests compare the two on real renders, and show that each
key changes when anything it claims to cover changes.
"""

from __future__ import annotations

import ast
import os
import random
import re
import secrets
import shutil
import subprocess
import sys
import tomllib
from typing import TYPE_CHECKING, Any

import jinja2
import pytest

from tests.conftest import BIN, RENDER_SEED_VARIABLE, failure_excerpt, run_in
from tests.matrix import (
    DOCS_STUB,
    FENCE,
    MAIN_BASE,
    PACKAGE,
    ROOT,
    RUNTIME_DIR,
    ZIZMOR_AUDITED,
    Combination,
    Files,
    audit_keys,
    docs_link_forms_problems,
    docs_page_keys,
    example_skeleton,
    full_matrix,
    give_distinct_mtimes,
    keys_of_test_files,
    mypy_key,
    mypy_keys_settled,
    pytest_arguments,
    reduce_docs_tree,
    registry,
    ruff_keys,
)
from tests.rendering import TemplateRenderer, resource_questions, source_problems, tree_of

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    RunTool = Callable[..., subprocess.CompletedProcess[str]]

pytestmark = pytest.mark.slow

ALL = tuple(resource.key for resource in registry.RESOURCES)
RENDER_SEED = int(os.environ.get(RENDER_SEED_VARIABLE) or secrets.randbelow(2**32))
"""The seed of this run's sample of combinations compared with Copier's renders: a
new one every run, the same in every worker (``pytest_configure`` sets it before
they start), printed in the run's header; set ``MATRIX_RENDER_SEED`` to repeat it."""
SAMPLED_RENDERS = 4


def _sampled_combination(index: int) -> Combination:
    """The *index*-th combination of this run's rotating sample of the main base."""
    family = [combo for combo in full_matrix() if combo.base() == MAIN_BASE]
    fixed = [Combination(ALL, True, True), Combination((), False, False)]
    drawn = random.Random(RENDER_SEED).sample(family, SAMPLED_RENDERS)
    combos: list[Combination] = [*fixed, *drawn]
    return combos[index]


@pytest.mark.parametrize("index", range(SAMPLED_RENDERS + 2))
def test_the_renderer_makes_what_copier_makes(
    index: int,
    renderers: Callable[[Combination], TemplateRenderer],
    copier_copy: Callable[[dict[str, Any]], Path],
) -> None:
    """The premise of ``tests/rendering.py``, on every run: byte for byte, mode for mode.

    Every file's path, bytes and permission bits, for the combination with every
    resource, the one with none, and four drawn at random from the whole matrix.
    """
    combo = _sampled_combination(index)
    made = renderers(combo).files(combo.answers())
    copied = tree_of(copier_copy(combo.answers()))
    differing = sorted(name for name in {*made, *copied} if made.get(name) != copied.get(name))
    assert differing == [], f"{combo.id} (MATRIX_RENDER_SEED={RENDER_SEED})"


@pytest.mark.parametrize(
    ("source", "questions"),
    [
        ("{% if 'file' in resources %}x{% endif %}", ("file",)),
        ("{% if resources %}x{% endif %}", ("",)),
        ("{% if not resources %}x{% endif %}", ("",)),
        ("{{ 'a' if resources else 'b' }}", ("",)),
        ("{{ 'lock' in resources and 'file' in resources }}", ("file", "lock")),
        ("{% for name in resources %}{{ name }}{% endfor %}", None),
        ("{{ resources | length }}", None),
        ("{{ resources[0] }}", None),
        ("{% set chosen = resources %}{{ 'file' in chosen }}", None),
        ("{{ 'file' in resources + ['x'] }}", None),
        ("{{ resources == ['file'] }}", None),
        ("{{ key in resources }}", None),
        ("{{ resources or 'none' }}", None),
    ],
)
def test_a_file_is_keyed_by_the_questions_it_asks_of_resources(
    source: str, questions: tuple[str, ...] | None
) -> None:
    """Any read of ``resources`` but a question keys the file by the whole list."""
    assert resource_questions(jinja2.Environment().parse(source)) == questions


@pytest.mark.parametrize(
    "source",
    [
        "{% include 'other.jinja' %}",
        "{% import 'macros.jinja' as macros %}",
        "{% extends 'base.jinja' %}",
        "{{ 'x' | reads_context }}",
        "{{ ['x'] | map('reads_context') | list }}",
        "{% if 'x' is context_test %}{% endif %}",
    ],
)
def test_a_file_that_may_read_more_than_it_names_is_refused(source: str) -> None:
    env = jinja2.Environment()
    env.filters["reads_context"] = jinja2.pass_context(lambda context, value: value)
    env.tests["context_test"] = jinja2.pass_context(lambda context, value: True)
    assert source_problems(env, env.parse(source)) != []
    assert source_problems(env, env.parse("{{ ['x'] | map('upper') | list }}")) == []


FAILING_TESTS = """\
import warnings

import pytest


def test_passes() -> None:
    assert True


def test_fails() -> None:
    assert 1 + 1 == 3


def test_warns() -> None:
    warnings.warn("turned into an error by the settings", UserWarning, stacklevel=1)


@pytest.mark.skip(reason="skipped on purpose")
def test_skipped() -> None:
    pass


def test_runs_where_a_fresh_interpreter_runs() -> None:
    import sys
    from pathlib import Path

    from hypothesis.configuration import storage_directory

    home = storage_directory(intent_to_write=False).home_directory
    assert home == Path.cwd() / ".hypothesis"
    assert sys.modules["__main__"].__spec__.name == "pytest.__main__"
    assert sys.argv[0].endswith("__main__.py")
    assert str(Path.cwd()) in sys.path
"""


BROKEN_PAGE = """\
# Broken

```python
assert 1 + 1 == 3
```
"""


def _outcomes(output: str) -> list[str]:
    """The ``-rA`` summary lines (``PASSED tests/...``), without timings."""
    prefixes = ("PASSED", "FAILED", "SKIPPED", "ERROR", "XFAIL", "XPASS")
    return sorted(line.split(" - ")[0] for line in output.splitlines() if line.startswith(prefixes))


def test_preloaded_pytest_reports_what_a_fresh_interpreter_reports(
    render: Callable[[Combination], Path],
    run_preloaded: RunTool,
    tmp_path: Path,
) -> None:
    project = shutil.copytree(render(Combination(("file", "sqlite"), True, True)), tmp_path / "p")
    (project / "tests" / "test_outcomes.py").write_text(FAILING_TESTS, encoding="utf-8")
    (project / "docs" / "broken.md").write_text(BROKEN_PAGE, encoding="utf-8")
    args = ["-p", "no:cacheprovider", "-rA", "-q", "tests/test_files.py", "tests/test_outcomes.py"]
    args.append("tests/test_docs_examples.py")
    fresh = run_in(project, [sys.executable, "-m", "pytest", *args], 600)
    with pytest.raises(pytest.fail.Exception) as failed:
        run_preloaded(project, "pytest", *args)
    assert fresh.returncode == 1, fresh.stdout
    fresh_outcomes = _outcomes(fresh.stdout)
    assert "FAILED tests/test_outcomes.py::test_fails" in fresh_outcomes
    assert "FAILED tests/test_outcomes.py::test_warns" in fresh_outcomes
    assert sum(line.startswith("PASSED tests/test_files.py") for line in fresh_outcomes) > 10
    assert (
        "PASSED tests/test_outcomes.py::test_runs_where_a_fresh_interpreter_runs" in fresh_outcomes
    )
    assert "FAILED tests/test_docs_examples.py::test_examples_of_the_page_run[broken.md]" in (
        fresh_outcomes
    )
    passed_page = "PASSED tests/test_docs_examples.py::test_examples_of_the_page_run[tutorial.md]"
    assert passed_page in fresh_outcomes
    assert sum("test_examples_of_the_page_run" in line for line in fresh_outcomes) > 5
    assert _outcomes(str(failed.value)) == fresh_outcomes


def test_preloaded_mypy_reports_what_a_fresh_mypy_reports(
    render: Callable[[Combination], Path],
    run_tool: RunTool,
    run_preloaded: RunTool,
    tmp_path: Path,
) -> None:
    project = shutil.copytree(render(Combination(("lock",), False, False)), tmp_path / "p")
    fresh = run_tool(project, "mypy", "--cache-dir", str(tmp_path / "fresh-cache"))
    preloaded = run_preloaded(project, "mypy", "--cache-dir", str(tmp_path / "cache"))
    assert preloaded.stdout == fresh.stdout
    module = project / "src" / PACKAGE / "locks.py"
    module.write_text(module.read_text(encoding="utf-8") + "\nWRONG: int = 'text'\n")
    with pytest.raises(pytest.fail.Exception) as fresh_failure:
        run_tool(project, "mypy", "--cache-dir", str(tmp_path / "fresh-cache"))
    with pytest.raises(pytest.fail.Exception) as preloaded_failure:
        run_preloaded(project, "mypy", "--cache-dir", str(tmp_path / "cache"))
    message = (
        'Incompatible types in assignment (expression has type "str", variable has type "int")'
    )
    assert message in str(fresh_failure.value)
    assert message in str(preloaded_failure.value)


def _findings(output: str) -> list[str]:
    """A Zensical build's findings: each message and where, and the count."""
    plain = re.sub(r"\x1b\[[0-9;]*m", "", output)
    return re.findall(r"(?:Warning|Error):.*|\S+\.md:\d+:\d+|\d+ issues? found", plain)


def test_preloaded_zensical_builds_what_a_fresh_zensical_builds(
    render: Callable[[Combination], Path],
    run_tool: RunTool,
    run_preloaded: RunTool,
    tmp_path: Path,
) -> None:
    project = render(Combination(("lock", "file"), True, True))
    fresh_copy = shutil.copytree(project, tmp_path / "fresh")
    preloaded_copy = shutil.copytree(project, tmp_path / "preloaded")
    fresh = run_tool(fresh_copy, "zensical", "build", "--strict")
    preloaded = run_preloaded(preloaded_copy, "zensical", "build", "--strict")
    assert tree_of(preloaded_copy / "site") == tree_of(fresh_copy / "site")
    assert "No issues found" in fresh.stderr
    assert "No issues found" in preloaded.stdout
    for copy in (fresh_copy, preloaded_copy):
        page = copy / "docs" / "helpers.md"
        page.write_text(page.read_text(encoding="utf-8") + "\nSee [nowhere](nowhere.md).\n")
    with pytest.raises(pytest.fail.Exception) as fresh_failure:
        run_tool(fresh_copy, "zensical", "build", "--strict")
    with pytest.raises(pytest.fail.Exception) as preloaded_failure:
        run_preloaded(preloaded_copy, "zensical", "build", "--strict")
    findings = [_findings(str(failure.value)) for failure in (fresh_failure, preloaded_failure)]
    assert "1 issue found" in findings[0]
    assert findings[0] == findings[1]


def test_a_docs_twins_mypy_run_settles_the_docs_less_twin(
    render: Callable[[Combination], Path],
    run_preloaded: RunTool,
    tmp_path: Path,
) -> None:
    with_docs = shutil.copytree(render(Combination(("lock", "file"), True, True)), tmp_path / "d")
    without = shutil.copytree(render(Combination(("lock", "file"), True, False)), tmp_path / "n")
    assert mypy_keys_settled(with_docs) == [mypy_key(with_docs), mypy_key(without)]
    assert mypy_keys_settled(without) == [mypy_key(without)]
    # The premise: nothing imports the test file left out, no per-module settings.
    settings = tomllib.loads((with_docs / "pyproject.toml").read_text(encoding="utf-8"))
    assert "overrides" not in settings["tool"]["mypy"]
    for path in with_docs.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_bytes())):
            if isinstance(node, ast.Import | ast.ImportFrom):
                names = [alias.name for alias in node.names] + [getattr(node, "module", "")]
                assert not any("test_docs_examples" in (name or "") for name in names), path
    # The slow truth: what mypy finds in the docs-less twin, it finds with docs too.
    for project in (with_docs, without):
        module = project / "src" / PACKAGE / "locks.py"
        module.write_text(module.read_text(encoding="utf-8") + "\nWRONG: int = 'text'\n")
        test = project / "tests" / "test_locks.py"
        unused_ignore = "\nFINE: int = 1  # type: ignore[assignment]\n"
        test.write_text(test.read_text(encoding="utf-8") + unused_ignore)
    found = []
    for project in (with_docs, without):
        with pytest.raises(pytest.fail.Exception) as failure:
            run_preloaded(project, "mypy", "--cache-dir", str(project / ".mypy-cache"))
        found.append(set(re.findall(r"^\S+\.py:\d+: error: .*$", str(failure.value), re.MULTILINE)))
    assert len(found[1]) == 2
    assert found[1] <= found[0]


def _build_findings(project: Path, run_preloaded: RunTool) -> list[str]:
    try:
        built = run_preloaded(project, "zensical", "build", "--strict")
    except pytest.fail.Exception as failure:
        return _findings(str(failure))
    return _findings(built.stdout)


PLANTED = {
    "a link to no page, in the tutorial": ("tutorial.md", "See [nowhere](nowhere.md)."),
    "a link to no anchor, in the tutorial": (
        "tutorial.md",
        "See [files](resources/files.md#no-such-anchor).",
    ),
    "a link to no page, in an API page": ("resources/files.md", "See [no](../nowhere.md)."),
    "a page whose anchor another page uses, changed": ("resources/files.md", ""),
}
"""Findings planted in a render: the page and the line added to it."""


@pytest.mark.parametrize("planted", PLANTED)
def test_a_reduced_docs_build_finds_what_the_full_build_finds(
    planted: str,
    render: Callable[[Combination], Path],
    run_preloaded: RunTool,
    tmp_path: Path,
) -> None:
    """Pages whose keys passed become stubs; the findings stay those of the full build."""
    project = shutil.copytree(render(Combination(("lock", "file"), True, True)), tmp_path / "p")
    assert docs_link_forms_problems(project) == []
    settled = docs_page_keys(project)
    page, line = PLANTED[planted]
    path = project / "docs" / page
    if planted.startswith("a page whose anchor"):
        # The tutorial links to an anchor of the files page, which then loses it.
        tutorial = project / "docs" / "tutorial.md"
        tutorial.write_text(
            tutorial.read_text(encoding="utf-8") + "\nSee [w](resources/files.md#whole)\n"
        )
        path.write_text(path.read_text(encoding="utf-8") + "\n## Whole\n")
        settled = docs_page_keys(project)  # both pass as they are, and are settled
        path.write_text(path.read_text(encoding="utf-8").replace("\n## Whole\n", "\n"))
    if line:
        path.write_text(path.read_text(encoding="utf-8") + f"\n{line}\n")
    keys = docs_page_keys(project)
    pending = {name for name, key in keys.items() if settled.get(name) != key}
    assert pending, "the change must change a key"
    assert len(pending) < len(keys)
    full = shutil.copytree(project, tmp_path / "full")
    reduced = shutil.copytree(project, tmp_path / "reduced")
    kept = reduce_docs_tree(reduced, pending)
    assert pending <= kept < set(keys)
    expected = _build_findings(full, run_preloaded)
    assert expected, "the planted finding must be found"
    assert _build_findings(reduced, run_preloaded) == expected


def test_a_reduced_docs_build_of_clean_pages_passes(
    render: Callable[[Combination], Path], run_preloaded: RunTool, tmp_path: Path
) -> None:
    project = render(Combination(("lock", "file"), True, True))
    # Pages that link to no anchor are kept alone; the testing page links to an
    # anchor of the helpers page (ClosingWith's section), which is kept with it.
    for pending, kept in (
        ({"docs/errors.md"}, set()),
        ({"docs/index.md"}, set()),
        ({"docs/testing.md"}, {"docs/helpers.md"}),
    ):
        reduced = shutil.copytree(project, tmp_path / str(len(list(tmp_path.iterdir()))))
        assert reduce_docs_tree(reduced, pending) == pending | kept
        helpers = (reduced / "docs" / "helpers.md").read_text(encoding="utf-8")
        assert (helpers == DOCS_STUB) == (not kept)
        assert _build_findings(reduced, run_preloaded) == []
    # A kept page's link to an anchor keeps the page that has the anchor, and so
    # on: the files page links to an anchor of the testing page, and that one to
    # an anchor of the helpers page.
    reduced = shutil.copytree(project, tmp_path / "anchored")
    errors = reduced / "docs" / "errors.md"
    errors.write_text(f"{errors.read_text()}\nSee [R](resources/files.md#reference).\n")
    kept = reduce_docs_tree(reduced, {"docs/errors.md"})
    assert kept == {
        "docs/errors.md",
        "docs/resources/files.md",
        "docs/testing.md",
        "docs/helpers.md",
    }
    assert _build_findings(reduced, run_preloaded) == []


def test_docs_page_keys_follow_links(render: Callable[[Combination], Path], tmp_path: Path) -> None:
    project = shutil.copytree(render(Combination(("lock", "file"), True, True)), tmp_path / "p")
    docs = project / "docs"
    tutorial, files = docs / "tutorial.md", docs / "resources" / "files.md"
    links = "\n[a](resources/files.md#x)\n[b](resources/locks.md)\n"
    tutorial.write_text(tutorial.read_text(encoding="utf-8") + links)
    before = docs_page_keys(project)
    files.write_text(files.read_text(encoding="utf-8") + "\nMore.\n")
    after = docs_page_keys(project)
    assert {name for name in before if after[name] != before[name]} == {
        "docs/tutorial.md",  # it links to an anchor of the page
        "docs/resources/files.md",
    }
    (docs / "resources" / "locks.md").unlink()  # the tutorial now links to it plainly
    gone = docs_page_keys(project)
    assert gone["docs/tutorial.md"] != after["docs/tutorial.md"]
    assert gone["docs/resources/files.md"] == after["docs/resources/files.md"]


@pytest.mark.parametrize("resource", registry.RESOURCES, ids=lambda r: r.key)
def test_a_resource_pages_key_ignores_the_other_resources(
    render: Callable[[Combination], Path], resource: registry.Resource
) -> None:
    # A page whose key changed with the other answers would be built once per
    # combination: an anchor link to the home page (its table lists the chosen
    # resources) made 318 docs builds of a full run out of 64.
    page = f"docs/resources/{resource.module}.md"
    alone = docs_page_keys(render(Combination((resource.key,), True, True)))
    every = tuple(other.key for other in registry.RESOURCES)
    together = docs_page_keys(render(Combination(every, True, True)))
    assert alone[page] == together[page]


def test_docs_link_forms_problems_sees_other_link_forms(
    render: Callable[[Combination], Path], tmp_path: Path
) -> None:
    project = shutil.copytree(render(Combination(("lock",), True, True)), tmp_path / "p")
    page = project / "docs" / "helpers.md"
    original = page.read_text(encoding="utf-8")
    for text in ("[a][pkg.thing]", "[a]: other.md", '<a href="other.md">a</a>'):
        page.write_text(f"{original}\n{text}\n")
        assert docs_link_forms_problems(project) != [], text
    page.write_text(original)
    assert docs_link_forms_problems(project) == []


def _changed(project: Path, name: str) -> None:
    path = project / name
    path.write_bytes(path.read_bytes() + b"\n# changed\n")


def test_mypy_key_changes_with_every_input(
    render: Callable[[Combination], Path], tmp_path: Path
) -> None:
    project = shutil.copytree(render(Combination(ALL, True, True)), tmp_path / "p")
    before = mypy_key(project)
    read = [p for folder in ("src", "tests", "benchmarks") for p in (project / folder).rglob("*")]
    for path in (p for p in read if p.is_file()):
        name = path.relative_to(project).as_posix()
        original = path.read_bytes()
        _changed(project, name)
        assert mypy_key(project) != before, name
        path.write_bytes(original)
    pyproject = project / "pyproject.toml"
    settings = pyproject.read_text(encoding="utf-8")
    pyproject.write_text(settings.replace("warn_unreachable = true", "warn_unreachable = false"))
    assert mypy_key(project) != before
    pyproject.write_text(settings)
    (project / "docs" / "index.md").write_text("other docs\n", encoding="utf-8")
    (project / "README.md").write_text("another readme\n", encoding="utf-8")
    assert mypy_key(project) == before, "mypy does not read the docs or the README"


def test_ruff_keys_cover_what_ruff_reads(
    render: Callable[[Combination], Path], run_tool: RunTool, tmp_path: Path
) -> None:
    project = shutil.copytree(render(Combination(ALL, True, True)), tmp_path / "p")
    listed = run_tool(project, "ruff", "check", "--no-cache", "--show-files", ".").stdout
    linted = {line.strip() for line in listed.splitlines() if line.strip()}
    # ``ruff format`` has no --show-files: its verbose log names each included file.
    log = run_tool(project, "ruff", "format", "--no-cache", "--check", "-v", ".").stderr
    formatted = set(re.findall(r'Included path via `include`: "(.+?)"', log))
    keys = ruff_keys(project)
    assert {str(project / name) for name in keys} == linted | formatted
    assert {name for name in formatted if name.endswith(".md")}, "Markdown is formatted"
    # A file's key follows its own bytes only...
    _changed(project, f"src/{PACKAGE}/files.py")
    changed = ruff_keys(project)
    assert {name for name in keys if keys[name] != changed[name]} == {f"src/{PACKAGE}/files.py"}
    # ...the settings...
    pyproject = project / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace("line-length = 88", "line-length = 89"))
    assert all(keys[name] != key for name, key in ruff_keys(project).items())
    # ...and which imported names are first-party, and which folders are packages.
    keys = ruff_keys(project)
    (project / "tests" / "hypothesis.py").write_text("", encoding="utf-8")
    first_party = ruff_keys(project)
    importers = {n for n, k in keys.items() if n in first_party and k != first_party[n]}
    assert importers
    assert all("hypothesis" in (project / name).read_text(encoding="utf-8") for name in importers)
    (project / "tests" / "__init__.py").write_text("", encoding="utf-8")
    packages = ruff_keys(project)
    assert all(packages[n] != first_party[n] for n in first_party if n.startswith("tests/"))


@pytest.mark.parametrize(
    ("opening", "closing", "indent"),
    [
        ("```python", "```", ""),
        ("```py", "```", ""),
        ("~~~python", "~~~", ""),
        ("````python title=example.py", "````", ""),
        ("```python", "```", "    "),  # in a list item
    ],
)
def test_a_markdown_files_ruff_key_is_its_fenced_blocks(
    render: Callable[[Combination], Path],
    run_tool: RunTool,
    tmp_path: Path,
    opening: str,
    closing: str,
    indent: str,
) -> None:
    """The premise of ``fenced_lines``: what ruff formats of a Markdown file is in its key."""
    project = shutil.copytree(render(Combination(("file",), False, False)), tmp_path / "p")
    readme = project / "README.md"
    text = readme.read_text(encoding="utf-8")
    before = ruff_keys(project)["README.md"]
    readme.write_text(text.replace("\n\n", "\n\nProse that ruff never reads.\n\n", 3))
    assert ruff_keys(project)["README.md"] == before, "prose is not in the key"

    def with_block(code: str) -> str:
        block = f"{indent}{opening}\n{indent}{code}\n{indent}{closing}\n"
        return f"{text}\n- A list item:\n\n{block}" if indent else f"{text}\n{block}"

    readme.write_text(with_block("x = [1, 2]"), encoding="utf-8")
    formatted = ruff_keys(project)["README.md"]
    run_tool(project, "ruff", "format", "--no-cache", "--check", "README.md")
    readme.write_text(with_block("x=[1,2]"), encoding="utf-8")
    assert ruff_keys(project)["README.md"] != formatted
    with pytest.raises(pytest.fail.Exception, match=r"README\.md"):
        run_tool(project, "ruff", "format", "--no-cache", "--check", "README.md")


def test_test_file_keys_change_with_every_input(
    render: Callable[[Combination], Path], tmp_path: Path
) -> None:
    """Each generated test file's key covers what ``keys_of_test_files`` says it reads."""
    project = shutil.copytree(render(Combination(ALL, True, False)), tmp_path / "p")
    before = keys_of_test_files(project)
    tests = project / "tests"
    every_test = {path.relative_to(tests).as_posix() for path in tests.rglob("test_*.py")}
    assert set(before) == every_test
    stress = {name for name in before if name.startswith("stress/")}
    assert len(stress) == len(registry.RESOURCES)
    for name in ("tests/stress/__init__.py", "tests/stress/conftest.py"):
        original = (project / name).read_bytes()
        _changed(project, name)
        after = keys_of_test_files(project)
        assert {test for test in before if after[test] != before[test]} == stress, name
        (project / name).write_bytes(original)
    core = [f"src/{PACKAGE}/{module}.py" for module in registry.CORE_MODULES]
    runtime = [f"{RUNTIME_DIR}/{module}.py" for module in registry.RUNTIME_MODULES]
    shared = ["tests/conftest.py", "tests/test_update_leftovers.py", *core, *runtime]
    for name in shared:
        original = (project / name).read_bytes()
        _changed(project, name)
        after = keys_of_test_files(project)
        assert all(after[test] != before[test] for test in before), name
        (project / name).write_bytes(original)
    _changed(project, f"src/{PACKAGE}/files.py")
    after = keys_of_test_files(project)
    changed = {test for test in before if after[test] != before[test]}
    assert changed == {"test_files.py", "test_package.py", "stress/test_files.py"}


def test_docs_examples_are_keyed_page_by_page(
    render: Callable[[Combination], Path], tmp_path: Path
) -> None:
    """A page's key follows its examples and the modules they import, no others."""
    project = shutil.copytree(render(Combination(ALL[:2], True, True)), tmp_path / "p")
    before = keys_of_test_files(project)
    pages = [p.relative_to(project / "docs").as_posix() for p in (project / "docs").rglob("*.md")]
    assert {f"test_docs_examples.py::{page}" for page in pages} <= set(before)
    for page in pages:
        path = project / "docs" / page
        original = path.read_bytes()
        for addition, follows in (
            (b"\nOne more line of prose.\n", False),
            (b"\n```pycon\n>>> 1 + 1\n2\n```\n", True),
            (b"\n<!-- invisible-code-block: python\nx = 1\n-->\n", True),
            (b"\nProse `with a ``` in it`.\n", True),
        ):
            path.write_bytes(original + addition)
            after = keys_of_test_files(project)
            changed = {name for name in before if after[name] != before[name]}
            assert changed == ({f"test_docs_examples.py::{page}"} if follows else set()), page
        path.write_bytes(original)
    _changed(project, f"src/{PACKAGE}/files.py")
    after = keys_of_test_files(project)
    changed = {name for name in before if after[name] != before[name]}
    assert "test_docs_examples.py::resources/files.md" in changed
    assert "test_docs_examples.py::resources/sqlite.md" not in changed
    arguments = pytest_arguments(["test_docs_examples.py::resources/files.md", "test_files.py"])
    assert arguments == [
        "tests/test_docs_examples.py::test_the_docs_have_pages",
        "tests/test_docs_examples.py::test_every_fence_is_run_or_a_shell_command[resources/files.md]",
        "tests/test_docs_examples.py::test_examples_of_the_page_run[resources/files.md]",
        "tests/test_files.py",
    ]


SAME_EXAMPLES = """\
import sys
from pathlib import Path

sys.path[:0] = ["src", "tests"]
import test_docs_examples as generated

for page, skeleton in zip(sys.argv[1::2], sys.argv[2::2]):
    seen = []
    for path in (page, skeleton):
        document = generated.SYBIL.parse(Path(path))
        seen.append([(type(e.parsed).__name__, str(getattr(e.parsed, "source", e.parsed)),
                      str(getattr(e.parsed, "want", ""))) for e in document])
    assert seen[0] == seen[1], page
    assert seen[0] or "```python" not in Path(page).read_text(), page
    print(page, len(seen[0]))
"""


def test_a_pages_skeleton_holds_every_example(
    render: Callable[[Combination], Path], tmp_path: Path
) -> None:
    """The generated test's own Sybil finds the same examples in a page and its skeleton."""
    checked = 0
    for combo in (Combination(ALL, True, True), Combination(ALL[3:5], False, True)):
        project = shutil.copytree(render(combo), tmp_path / combo.id)
        generated = (project / "tests" / "test_docs_examples.py").read_text(encoding="utf-8")
        assert f'FENCE = re.compile(r"{FENCE.pattern}", re.MULTILINE)' in generated
        arguments = []
        for page in sorted((project / "docs").rglob("*.md")):
            text = page.read_text(encoding="utf-8")
            skeleton = tmp_path / f"{combo.id}-{page.stem}.md"
            skeleton.write_text(example_skeleton(text), encoding="utf-8")
            assert len(skeleton.read_text(encoding="utf-8")) < len(text), page
            arguments += [str(page), str(skeleton)]
        result = run_in(project, [sys.executable, "-c", SAME_EXAMPLES, *arguments], 120)
        assert result.returncode == 0, result.stderr
        counts = dict(line.rsplit(" ", 1) for line in result.stdout.splitlines())
        assert int(counts[str(project / "docs" / "tutorial.md")]) > 20
        checked += len(counts)
    assert checked > 10


def test_skeletons_spare_the_tutorial_a_run_per_family(
    render: Callable[[Combination], Path],
) -> None:
    """Two families that differ in a resource without tutorial examples share its key."""
    keys = [
        keys_of_test_files(render(Combination(chosen, True, True)))
        for chosen in (("file", "sqlite", "lock"), ("file", "sqlite", "lock", "tempdir"))
    ]
    assert (
        keys[0]["test_docs_examples.py::tutorial.md"]
        == keys[1]["test_docs_examples.py::tutorial.md"]
    )
    assert keys[0]["test_docs_examples.py::index.md"] == keys[1]["test_docs_examples.py::index.md"]
    assert keys[0]["test_package.py"] != keys[1]["test_package.py"]


MEMO_CHECK = """\
import sys
import warnings
from importlib.machinery import PathFinder
from pathlib import Path

sys.path.insert(0, sys.argv[1])
from preloaded import CodeMemo, preload

preload(["pytest"])
from _pytest.assertion import rewrite

plain_rewrite = rewrite._rewrite_test
memo = CodeMemo(Path(sys.argv[2]))
memo.folder.mkdir()
assert memo.install() == [], "a patch of CodeMemo does not fit"


class Config:
    def getini(self, name):
        assert name == "enable_assertion_pass_hook", name
        return False


def filenames(code):
    found = {code.co_filename}
    for const in code.co_consts:
        if hasattr(const, "co_filename"):
            found |= filenames(const)
    return found


def through_memo(path):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        spec = PathFinder.find_spec(path.stem, [str(path.parent)])
        assert type(spec.loader).__name__ == "_MemoLoader", spec.loader
        code = spec.loader.get_code(path.stem)
        rewritten = rewrite._rewrite_test(path, Config())[1]
    return code, rewritten, [str(w.message) for w in caught]


first, second = Path(sys.argv[3]), Path(sys.argv[4])
names = sorted(p.relative_to(first) for p in first.rglob("*.py"))
kept = []
for root in (first, second):
    for name in names:
        path = root / name
        code, rewritten, caught = through_memo(path)
        source = path.read_bytes()
        plain = compile(source, str(path), "exec", dont_inherit=True)
        assert code == plain and filenames(code) == {str(path)}, path
        plain_rewritten = plain_rewrite(path, Config())[1]
        assert rewritten == plain_rewritten and filenames(rewritten) == {str(path)}, path
        assert caught == [] or name.stem == "warns", (path, caught)
        if name.stem == "warns":
            assert len(caught) == 2, caught  # the tuple assert: compile's, pytest's
    kept.append(sorted(memo.folder.iterdir()))
assert kept[0] == kept[1], "the second copy compiled something again"
assert len(kept[0]) == 2 * (len(names) - 1), len(kept[0])
print(len(names))
"""


def test_memoised_code_is_what_a_plain_compile_makes(
    render: Callable[[Combination], Path], tmp_path: Path
) -> None:
    """Every module of a render, compiled and rewritten through ``CodeMemo`` at a second path."""
    first = shutil.copytree(render(Combination(ALL, True, True)), tmp_path / "first")
    (first / "warns.py").write_text('PATTERN = "\\\\d"\nassert (PATTERN, "a tuple")\n')
    second = shutil.copytree(first, tmp_path / "second")
    memo = str(tmp_path / "memo")
    check = [sys.executable, "-c", MEMO_CHECK, str(ROOT / "tests"), memo, str(first), str(second)]
    result = run_in(tmp_path, check, 300)
    assert result.returncode == 0, result.stderr
    assert int(result.stdout) > 30


UNFIT_REWRITE = """\
import sys
from pathlib import Path

sys.path.insert(0, sys.argv[1])
from preloaded import CodeMemo, preload

preload(["pytest"])
from _pytest.assertion import rewrite


def _rewrite_test(fn, config, extra):
    return "pytest's own"


rewrite._rewrite_test = _rewrite_test
memo = CodeMemo(Path(sys.argv[2]))
memo.folder.mkdir()
print(memo.install()[0])
assert rewrite._rewrite_test is _rewrite_test, "an unfit rewrite was replaced"
"""


def test_a_pytest_whose_rewrite_changed_is_named_and_left_alone(tmp_path: Path) -> None:
    """The memo's one private patch is skipped, with a message naming it, where it cannot fit."""
    check = [sys.executable, "-c", UNFIT_REWRITE, str(ROOT / "tests"), str(tmp_path / "memo")]
    result = run_in(tmp_path, check, 120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("CodeMemo's patch of pytest's private _rewrite_test:")
    assert "_rewrite_test('fn', 'config', 'extra')" in result.stdout


INJECTED = '      - run: echo "${{ github.event.issue.title }}"\n'
"""A step that zizmor's ``template-injection`` audit finds, planted in ``ci.yml``."""


def _zizmor(project: Path, names: list[str]) -> tuple[int, dict[str, list[str]]]:
    """zizmor's exit status on *names*, and where it found something in each."""
    command = [str(BIN / "zizmor"), "--offline", "--no-config", "--no-progress", *names]
    result = run_in(project, command, 120)
    found = {name: re.findall(rf"--> {re.escape(name)}:(\d+:\d+)", result.stdout) for name in names}
    return result.returncode, found


def test_the_audit_of_a_file_reads_that_file_alone(
    render: Callable[[Combination], Path], tmp_path: Path
) -> None:
    """``audit_keys``'s premise: a file's verdict is the same alone and beside others.

    The matrix keys each audited file by its own bytes, so a file that passed in
    one combination is not audited again beside other files in another.
    """
    project = shutil.copytree(render(Combination(ALL, True, True)), tmp_path / "project")
    names = sorted(
        name for name in audit_keys(Files.of(project)) if name.startswith(ZIZMOR_AUDITED)
    )
    assert {".github/workflows/ci.yml", ".github/workflows/docs.yml"} <= set(names)
    ci = project / ".github" / "workflows" / "ci.yml"
    text = ci.read_text(encoding="utf-8")
    assert "      - run: uv sync\n" in text
    ci.write_text(text.replace("      - run: uv sync\n", INJECTED + "      - run: uv sync\n", 1))
    status, together = _zizmor(project, names)
    assert status != 0
    assert together[".github/workflows/ci.yml"] != []
    for name in names:
        alone_status, alone = _zizmor(project, [name])
        assert alone[name] == together[name], name
        assert (alone_status == 0) == (together[name] == []), name
    # prek validates the configuration it is given, with nothing of the project beside it.
    lonely = tmp_path / "lonely"
    lonely.mkdir()
    shutil.copy2(project / ".pre-commit-config.yaml", lonely)
    for folder in (project, lonely):
        command = [str(BIN / "prek"), "validate-config", ".pre-commit-config.yaml"]
        assert run_in(folder, command, 120).returncode == 0, folder


def test_each_render_gets_mtimes_of_its_own_for_mypy(tmp_path: Path) -> None:
    """Equal sizes and equal whole-second mtimes would pass one module for another."""
    projects = [tmp_path / "first", tmp_path / "second"]
    for project in projects:
        (project / "src").mkdir(parents=True)
        (project / "src" / "module.py").write_text("x = 1\n", encoding="utf-8")
        give_distinct_mtimes(project)
    seconds = {int((project / "src" / "module.py").stat().st_mtime) for project in projects}
    assert len(seconds) == 2


def test_a_failed_tools_message_keeps_pytests_failures_section() -> None:
    figures = "".join(f"figure line {index}\n" for index in range(2000))
    output = f"..F..\n===== FAILURES =====\n____ test_x ____\nE   the cause\n{figures}"
    excerpt = failure_excerpt(output)
    assert "E   the cause" in excerpt
    assert excerpt.startswith("===== FAILURES =====")
    assert excerpt.endswith(output[-6000:])
    assert failure_excerpt("short\n= FAILURES =\nE x\n") == "short\n= FAILURES =\nE x\n"
