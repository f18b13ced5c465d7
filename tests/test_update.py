"""``copier update``, end to end, on every path a user takes.

Each test builds a temporary template repository with versions of its own (commits
and tags: see ``tests/updating.py``), copies a project from an older version through
Copier's command line, edits it as a user would, commits, updates, and checks what
arrived and what was kept.  A test that updates a project to a version it can
build ends with the updated project's own ``ruff check``, ``ruff format --check``,
``mypy --strict`` and test suite passing; the update-honesty test compares with a
fresh copy instead.  Resources are few (``file``, ``lock``) except where the path
needs more.
"""

from __future__ import annotations

import json
import os
import re
import sys
from typing import TYPE_CHECKING

import pytest
import yaml

from tests.conftest import BIN, run_in
from tests.matrix import (
    PACKAGE,
    RUNTIME_PYTHON,
    import_purity_problems,
    keys_of_test_files,
    mypy_key,
    pytest_arguments,
    registry,
)
from tests.updating import (
    CODE_MARKER,
    EXPORTS_MARKER,
    README_MARKER,
    TemplateRepo,
    add_user_function,
    add_user_test_file,
    answers,
    append_text,
    assert_merged_cleanly,
    assert_user_code_kept,
    commit_all,
    copier,
    copy_project,
    edit,
    exported_names,
    git,
    in_this_clone,
    leftovers,
    module,
    offered_resources,
    run,
    skip_unless_in_this_clone,
    unmerged,
    update,
    user_function,
)

if TYPE_CHECKING:
    import subprocess
    from collections.abc import Callable
    from pathlib import Path

    from tests.matrix import CheckLedger

    RunTool = Callable[..., subprocess.CompletedProcess[str]]

pytestmark = [pytest.mark.slow, pytest.mark.update]

OLD_FILE_SUMMARY = "Files, opened for one block or replaced atomically (old wording)."
FILES_DOCSTRING = '"""Files: open one for the length of a block, or replace one atomically.'
OLD_FILES_DOCSTRING = '"""Files: opened for one block, or replaced atomically (old wording).'
SUPPORTED = "Supported: Python {{ python_min }} and newer"
OLD_SUPPORTED = "Runs on: Python {{ python_min }} and newer"
OLD_LAST_LINE = "# the older version's last line"
CHANGELOG_LINE = "- Initial release, generated from the resource-safe package template."


@pytest.fixture
def check_project(
    run_tool: RunTool, run_preloaded: RunTool, mypy_cache: Path, ledger: CheckLedger
) -> Callable[[Path], None]:
    """The updated project's own lint, format check, strict types and test suite.

    mypy and the test files are keyed as in the matrix (``mypy_key``,
    ``keys_of_test_files``), in the same ledger: a test file that passed with the
    same inputs in this session, in the matrix or another update, is not run
    again.  The premise of those keys holds here too: every module of the updated
    project, the user's own and ``__init__.py`` with the user's lines included,
    only defines names when imported (checked below).  ``test_update_leftovers.py``
    runs every time: it reads every file of the project for conflict markers and
    ``*.rej`` files, which an update can leave, so its key (its own text) does not
    cover what it reads here.
    """

    def _check(project: Path) -> None:
        run_tool(project, "ruff", "check", "--no-cache", ".")
        run_tool(project, "ruff", "format", "--no-cache", "--check", ".")
        modules = sorted((project / "src" / PACKAGE).glob("*.py"))  # __init__.py included
        assert [problem for path in modules for problem in import_purity_problems(path)] == []
        key = mypy_key(project)
        if not ledger.passed("mypy", key):
            run_preloaded(project, "mypy", "--cache-dir", str(mypy_cache))
            ledger.record("mypy", key)
        check = f"pytest-{RUNTIME_PYTHON}"
        keys = keys_of_test_files(project)
        pending = [name for name, key in keys.items() if not ledger.passed(check, key)]
        pending = sorted({*pending, "test_update_leftovers.py"})
        run_preloaded(
            project, "pytest", "-q", "-p", "no:cacheprovider", "-x", *pytest_arguments(pending)
        )
        for name in pending:
            ledger.record(check, keys[name])

    return _check


def older_version(template: Path) -> None:
    """Today's template as an older version: other wording in four files."""
    summary = registry.BY_KEY["file"].summary
    registry_file = template / "extensions" / "registry.py"
    edit(registry_file, f'summary="{summary}"', f'summary="{OLD_FILE_SUMMARY}"')
    files = next((template / "template" / "src" / "{{ package_name }}").glob("*files.py*"))
    edit(files, FILES_DOCSTRING, OLD_FILES_DOCSTRING)
    # The module's last line of code, right above the marker the user writes below.
    text = files.read_text(encoding="utf-8")
    last = text[: text.rindex("\n\n\n" + CODE_MARKER)].rsplit("\n", 1)[1]
    assert last.strip(), "files.py has no code right above the marker"
    assert not last.lstrip().startswith(("{%", "#")), last
    edit(files, f"{last}\n\n\n{CODE_MARKER}", f"{last}  {OLD_LAST_LINE}\n\n\n{CODE_MARKER}")
    edit(template / "template" / "README.md.jinja", SUPPORTED, OLD_SUPPORTED)
    edit(template / "template" / "CHANGELOG.md.jinja", CHANGELOG_LINE, "- Initial release.")


def test_template_change_arrives_and_user_edits_stay(
    tmp_path: Path, check_project: Callable[[Path], None]
) -> None:
    """Path 1: edits to a module, its tests, README, CHANGELOG and new files all stay."""
    template = TemplateRepo(tmp_path / "template")
    template.release("v1.0.0", older_version)
    template.release("v1.1.0")
    project = copy_project(template, tmp_path / "project", "v1.0.0", resources=["file"], docs=False)
    assert answers(project)["_commit"] == "v1.0.0"
    assert OLD_FILE_SUMMARY in (project / "README.md").read_text(encoding="utf-8")

    function = add_user_function(project, "files")
    user_tests = add_user_test_file(project, "files", function)
    generated_test = append_text(
        project / "tests" / "test_files.py",
        "\n\ndef test_user_round_trip(tmp_path: Path) -> None:\n"
        '    with ManagedFile(tmp_path / "user.txt", "w") as stream:\n'
        '        stream.write("kept")\n'
        '    assert (tmp_path / "user.txt").read_text(encoding="utf-8") == "kept"\n',
    )
    readme_note = append_text(project / "README.md", "\n## Our notes\n\nKept by updates.\n")
    changelog = project / "CHANGELOG.md"
    edit(changelog, "## [Unreleased]\n", "## [Unreleased]\n\n- Our own entry.\n")
    changelog_before = changelog.read_text(encoding="utf-8")
    own_module = module(project, "user_tools")
    own_module.write_text('"""The user\'s own module."""\n' + user_function("tool"), "utf-8")
    commit_all(project, "User edits")

    result = update(project, "--defaults")

    assert_merged_cleanly(project, result)
    assert answers(project)["_commit"] == "v1.1.0"
    readme = (project / "README.md").read_text(encoding="utf-8")
    # The new version's registry, wording and README line arrived.
    assert registry.BY_KEY["file"].summary in readme
    assert OLD_FILE_SUMMARY not in readme
    assert "Supported: Python 3.11 and newer" in readme
    files_text = module(project, "files").read_text(encoding="utf-8")
    assert files_text.startswith(FILES_DOCSTRING)
    assert OLD_LAST_LINE not in files_text  # changed right above the user's code
    # Every user edit stayed; CHANGELOG.md is the user's, byte for byte.
    assert_user_code_kept(
        project,
        {
            module(project, "files"): [user_function(function), f'    "{function}",\n'],
            project / "tests" / "test_files.py": [generated_test],
            project / "README.md": [readme_note],
        },
    )
    assert readme.index(README_MARKER) < readme.index(readme_note)
    assert user_tests.is_file()
    assert own_module.is_file()
    assert changelog.read_text(encoding="utf-8") == changelog_before
    check_project(project)


def test_adding_a_resource(tmp_path: Path, check_project: Callable[[Path], None]) -> None:
    """Path 2: a resource added by update brings its module, tests, docs page, exports."""
    template = TemplateRepo(tmp_path / "template")
    template.release("v1.0.0")
    project = copy_project(template, tmp_path / "project", resources=["file"], docs=True)
    function = add_user_function(project, "files")
    user_tests = add_user_test_file(project, "files", function)
    init = module(project, "__init__")
    edit(init, EXPORTS_MARKER, f'{EXPORTS_MARKER}    "__version__",\n')
    edit(init, "\n__all__ = [", '\n__version__ = "0.1.0"\n\n__all__ = [')
    commit_all(project, "User edits")

    result = update(project, "--defaults", "--data", "resources=[file, lock]")

    assert_merged_cleanly(project, result)
    assert answers(project)["resources"] == ["file", "lock"]
    assert module(project, "locks").is_file()
    assert (project / "tests" / "test_locks.py").is_file()
    assert (project / "docs" / "resources" / "locks.md").is_file()
    assert "resources/locks.md" in (project / "mkdocs.yml").read_text(encoding="utf-8")
    assert exported_names(init) == [
        "AtomicWriter",
        "ManagedFile",
        "ReusableTimedLock",
        "TimedLock",
        "__version__",
    ]
    assert_user_code_kept(
        project,
        {module(project, "files"): [user_function(function), f'    "{function}",\n']},
    )
    assert user_tests.is_file()
    check_project(project)


def test_dropping_a_resource(tmp_path: Path, check_project: Callable[[Path], None]) -> None:
    """Path 3: a resource dropped by update takes its files; everything else stays."""
    template = TemplateRepo(tmp_path / "template")
    template.release("v1.0.0")
    project = copy_project(template, tmp_path / "project", resources=["file", "lock"], docs=True)
    function = add_user_function(project, "files")
    user_tests = add_user_test_file(project, "files", function)
    locks_function = add_user_function(project, "locks")
    commit_all(project, "User edits")

    result = update(project, "--defaults", "--data", "resources=[file]")

    assert_merged_cleanly(project, result)
    for gone in (
        module(project, "locks"),
        project / "tests" / "test_locks.py",
        project / "docs" / "resources" / "locks.md",
    ):
        assert not gone.exists(), gone
    # Copier deletes a dropped module even if the user edited it; git still has it,
    # and the closing message names every deleted file.
    assert locks_function in git(project, "show", f"HEAD:src/{PACKAGE}/locks.py")
    deleted = result.stderr[result.stderr.index("DELETED:") :]
    for name in (f"src/{PACKAGE}/locks.py", "tests/test_locks.py", "docs/resources/locks.md"):
        assert f"\n  {name}\n" in deleted, deleted
    assert "TimedLock" not in module(project, "__init__").read_text(encoding="utf-8")
    assert "locks" not in (project / "mkdocs.yml").read_text(encoding="utf-8")
    assert_user_code_kept(project, {module(project, "files"): [user_function(function)]})
    assert user_tests.is_file()
    check_project(project)


def test_toggling_async_and_docs(tmp_path: Path, check_project: Callable[[Path], None]) -> None:
    """Path 4: async_support on and off, docs off and on, user code at every module end."""
    template = TemplateRepo(tmp_path / "template")
    template.release("v1.0.0")
    project = copy_project(
        template, tmp_path / "project", resources=["file", "lock"], async_support=False
    )
    kept: dict[Path, list[str]] = {}
    for name in ("files", "locks"):
        function = add_user_function(project, name)
        kept[module(project, name)] = [user_function(function), f'    "{function}",\n']
    helper = module(project, "helpers")
    kept[helper] = [append_text(helper, user_function("user_helpers_helper"))]
    for name in ("test_files", "test_locks", "test_toolkit", "stress/test_files"):
        test_file = project / "tests" / f"{name}.py"
        function = f"{name.replace('/', '_')}_by_user"
        kept[test_file] = [
            append_text(test_file, f"\n\ndef {function}() -> None:\n    assert True\n")
        ]
    readme = project / "README.md"
    kept[readme] = [append_text(readme, "\n## Our notes\n\nKept by updates.\n")]
    commit_all(project, "User edits")

    steps = [
        (["--data", "async_support=true"], ["AsyncManagedFile", "AsyncTimedLock"]),
        (["--data", "async_support=false"], []),
        (["--data", "docs=false"], []),
        (["--data", "docs=true"], []),
    ]
    for data, async_names in steps:
        result = update(project, "--defaults", *data)
        assert_merged_cleanly(project, result)
        assert_user_code_kept(project, kept)
        init = module(project, "__init__").read_text(encoding="utf-8")
        for name in ("AsyncManagedFile", "AsyncTimedLock"):
            assert (name in init) == (name in async_names), (data, name)
        assert (project / "mkdocs.yml").exists() == (data != ["--data", "docs=false"])
        commit_all(project, f"Update {data}")
    assert (project / "docs" / "resources" / "files.md").is_file()
    check_project(project)


def conflicting_version(template: Path) -> None:
    """A newer version that changes the line the user changes too."""
    files = template / "template" / "src" / "{{ package_name }}"
    edit(next(files.glob("*files.py*")), FILES_DOCSTRING, OLD_FILES_DOCSTRING)


USER_DOCSTRING = '"""Files: our own summary line, which the user rewrote.'


@pytest.mark.parametrize("mode", ["inline", "rej"])
def test_real_conflict_is_loud_and_loses_nothing(
    tmp_path: Path, check_project: Callable[[Path], None], mode: str
) -> None:
    """Path 5: user and template change the same line: Copier exits 0, we do not."""
    template = TemplateRepo(tmp_path / "template")
    template.release("v1.0.0")
    template.release("v1.1.0", conflicting_version)
    project = copy_project(template, tmp_path / "project", "v1.0.0", resources=["file"], docs=False)
    files = module(project, "files")
    edit(files, FILES_DOCSTRING, USER_DOCSTRING)
    commit_all(project, "User edit on a template line")

    result = update(project, "--defaults", f"--conflict={mode}")

    assert result.returncode == 0  # Copier's own verdict: hence the checks below
    left = leftovers(project)
    text = files.read_text(encoding="utf-8")
    rejected = project / "src" / PACKAGE / "files.py.rej"
    if mode == "inline":
        assert unmerged(project) == [f"src/{PACKAGE}/files.py"]
        assert left == [f"src/{PACKAGE}/files.py"]
        # Nothing lost: the user's line and the template's are both in the file.
        assert USER_DOCSTRING in text
        assert OLD_FILES_DOCSTRING in text
    else:
        assert left == [f"src/{PACKAGE}/files.py.rej"]
        assert text.startswith(OLD_FILES_DOCSTRING)
        assert USER_DOCSTRING in rejected.read_text(encoding="utf-8")
    # Loud: Copier's closing message names the file ...
    assert "CONFLICTS: copier update exits 0" in result.stderr
    assert f"  {left[0]}\n" in result.stderr
    # ... and so does the project's own test run, first of all.
    suite = run_in(project, [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"], 300)
    assert suite.returncode == 1, suite.stdout[-3000:]
    assert "copier update left conflicts to resolve" in suite.stdout
    assert left[0] in suite.stdout
    assert "1 failed in" in suite.stdout  # only the leftovers test ran

    # The user resolves it: keeps their line, drops the markers (or the .rej file).
    if mode == "inline":
        resolved = re.sub(
            r"^<{7} before updating\n(.*?)^={7}\n.*?^>{7} after updating\n",
            r"\1",
            text,
            flags=re.M | re.S,
        )
        files.write_text(resolved, encoding="utf-8")
    else:
        edit(files, OLD_FILES_DOCSTRING, USER_DOCSTRING)
        rejected.unlink()
    assert leftovers(project) == []
    commit_all(project, "Resolve the update's conflict")
    assert files.read_text(encoding="utf-8").startswith(USER_DOCSTRING)
    check_project(project)


def newer_version(template: Path) -> None:
    """A newer version: other README wording, and a question of its own."""
    edit(template / "template" / "README.md.jinja", SUPPORTED, OLD_SUPPORTED)
    with (template / "copier.yml").open("a", encoding="utf-8") as config:
        config.write(
            "\nrelease_notes:\n  type: str\n  help: Where release notes go (a new question)\n"
            "  default: CHANGELOG.md\n"
        )


def test_check_update_reports_the_newer_version(
    tmp_path: Path, check_project: Callable[[Path], None]
) -> None:
    """Path 6: ``check-update`` finds a newer tag; only ``--quiet`` makes that exit 2."""
    template = TemplateRepo(tmp_path / "template")
    template.release("v1.0.0")
    project = copy_project(template, tmp_path / "project", resources=["lock"], docs=False)

    def check_update(*args: str) -> tuple[int, str]:
        result = copier(project, "check-update", *args, check=False)
        return result.returncode, result.stdout + result.stderr

    assert check_update() == (0, "Project is up-to-date!\n")
    assert check_update("--quiet")[0] == 0
    template.release("v1.1.0", newer_version)
    code, output = check_update()
    assert code == 0  # an update exists, and the exit code does not say so
    assert "New template version available" in output
    assert "Current version is 1.0.0, latest version is 1.1.0" in output
    assert check_update("--quiet") == (2, "")
    code, output = check_update("--output-format", "json")
    assert code == 0
    assert json.loads(output.strip().splitlines()[-1]) == {
        "update_available": True,
        "current_version": "1.0.0",
        "latest_version": "1.1.0",
    }
    # A pre-release tag (PEP 440) is no update, unless asked for.
    template.release("v1.2.0a1")
    code, output = check_update("--quiet")
    assert code == 2  # still 1.1.0
    result = update(project, "--defaults")
    assert_merged_cleanly(project, result)
    assert answers(project)["_commit"] == "v1.1.0"
    commit_all(project, "Update to 1.1.0")
    assert check_update("--quiet")[0] == 0
    assert check_update("--quiet", "--prereleases")[0] == 2
    check_project(project)


def test_update_with_defaults_keeps_every_answer(
    tmp_path: Path, check_project: Callable[[Path], None]
) -> None:
    """``--defaults``: old answers kept, a new question gets its default, no prompt."""
    template = TemplateRepo(tmp_path / "template")
    template.release("v1.0.0")
    template.release("v1.1.0", newer_version)
    project = copy_project(
        template, tmp_path / "project", "v1.0.0", resources=["lock"], async_support=True
    )
    before = answers(project)

    result = update(project, "--defaults")

    assert_merged_cleanly(project, result)
    after = answers(project)
    assert after.pop("release_notes") == "CHANGELOG.md"
    assert after == {**before, "_commit": "v1.1.0"}
    assert "Runs on: Python 3.11" in (project / "README.md").read_text(encoding="utf-8")
    check_project(project)


def test_update_with_skip_answered_asks_only_new_questions(
    tmp_path: Path, check_project: Callable[[Path], None]
) -> None:
    """``--skip-answered``: only the new question is asked, so ``--data`` for it suffices."""
    template = TemplateRepo(tmp_path / "template")
    template.release("v1.0.0")
    template.release("v1.1.0", newer_version)
    project = copy_project(template, tmp_path / "project", "v1.0.0", resources=["lock"])
    before = answers(project)
    new_answer = ("--data", "release_notes=docs/releases.md")

    # Without it, Copier asks every question again, and there is no terminal here.
    asked = update(project, *new_answer, check=False)
    assert asked.returncode == 1
    assert "Interactive session required" in asked.stderr
    assert git(project, "status", "--porcelain") == ""

    result = update(project, "--skip-answered", *new_answer)

    assert_merged_cleanly(project, result)
    assert answers(project) == {
        **before,
        "_commit": "v1.1.0",
        "release_notes": "docs/releases.md",
    }
    check_project(project)


def test_update_refuses_a_dirty_tree(tmp_path: Path) -> None:
    """Copier refuses to update uncommitted work, and says so; nothing changes."""
    template = TemplateRepo(tmp_path / "template")
    template.release("v1.0.0")
    template.release("v1.1.0", newer_version)
    project = copy_project(template, tmp_path / "project", "v1.0.0", resources=["lock"])
    readme = project / "README.md"
    uncommitted = append_text(readme, "\nNot committed yet.\n")

    result = update(project, "--defaults", check=False)

    assert result.returncode == 1
    assert "Destination repository is dirty; cannot continue." in result.stderr
    assert "commit or stash your local changes" in result.stderr
    assert git(project, "status", "--porcelain") == " M README.md\n"
    assert readme.read_text(encoding="utf-8").endswith(uncommitted)
    assert answers(project)["_commit"] == "v1.0.0"


def test_update_refuses_to_rename_the_package(tmp_path: Path) -> None:
    """A new package_name would delete the package with the user's code: refused."""
    template = TemplateRepo(tmp_path / "template")
    template.release("v1.0.0")
    project = copy_project(template, tmp_path / "project", resources=["lock"])
    function = add_user_function(project, "locks")
    commit_all(project, "User edits")

    result = update(project, "--defaults", "--data", "package_name=renamed", check=False)

    assert result.returncode == 1
    assert f"package_name was {PACKAGE!r} when this project was generated" in result.stderr
    assert f"git mv src/{PACKAGE} src/renamed" in result.stderr
    assert git(project, "status", "--porcelain") == ""
    assert_user_code_kept(project, {module(project, "locks"): [user_function(function)]})


BASELINE = "62a75d1"
"""This repository's main before the contract and hardening issues (no tags then)."""


def test_update_from_the_baseline_commit(
    tmp_path: Path, check_project: Callable[[Path], None]
) -> None:
    """Path 7: a project generated from commit 62a75d1 updates to this version.

    Every resource, async variants and docs: the contract core, the hardening and the
    update layout all arrive.  The user's own files, a README paragraph and a
    CHANGELOG entry merge cleanly.  Code at the end of ``files.py`` conflicts, once:
    back then the module ended with its async class; now private helpers follow it,
    then the comment below which user code goes (the layout that lets later updates
    merge).  The test resolves it as docs/updating.md says.
    """
    skip_unless_in_this_clone(BASELINE)
    template = TemplateRepo(tmp_path / "template")
    template.release("v0.0.1", commit=BASELINE)
    template.release("v0.1.0")
    project = copy_project(
        template,
        tmp_path / "project",
        "v0.0.1",
        resources=offered_resources(BASELINE),  # every resource it knew
        async_support=True,
        docs=True,
    )
    assert not module(project, "_resource").exists()  # the contract core came later
    own_module = module(project, "user_tools")
    own_module.write_text('"""The user\'s own module."""\n' + user_function("tool"), "utf-8")
    own_tests = add_user_test_file(project, "user_tools", "tool")
    readme = project / "README.md"
    note = "\nOur own paragraph, after the description.\n"
    edit(readme, "open.\n\nEvery resource", f"open.\n{note}\nEvery resource")
    changelog = project / "CHANGELOG.md"
    edit(changelog, "## [Unreleased]\n", "## [Unreleased]\n\n- Our own entry.\n")
    changelog_before = changelog.read_text(encoding="utf-8")
    kept = {readme: [note]}
    files = module(project, "files")
    files_function = append_text(files, user_function("user_files_helper"))
    commit_all(project, "User edits")

    result = update(project, "--defaults")

    assert answers(project)["_commit"] == "v0.1.0"
    files_path = f"src/{PACKAGE}/files.py"
    assert unmerged(project) == [files_path]
    assert leftovers(project) == [files_path]
    assert f"  {files_path}\n" in result.stderr
    assert files_function in files.read_text(encoding="utf-8")  # kept, between markers
    # Resolved: the template's side, then the user's function again at the end.
    git(project, "checkout", "--theirs", "--", files_path)
    append_text(files, files_function)
    assert leftovers(project) == []
    commit_all(project, "Update to 0.1.0, conflict resolved")

    for core in ("_resource", "_cleanup"):
        assert module(project, f"{registry.RUNTIME}/{core}").is_file()
    assert (project / "tests" / "test_update_leftovers.py").is_file()
    assert "check-merge-conflict" in (project / ".pre-commit-config.yaml").read_text()
    assert_user_code_kept(project, kept)
    assert own_module.is_file()
    assert own_tests.is_file()
    assert changelog.read_text(encoding="utf-8") == changelog_before
    check_project(project)


BEFORE_RUNTIME = "385f9dc"
"""This repository's main before the core became the verbatim ``_runtime`` package."""


def _project_from(tmp_path: Path, commit: str, resources: list[str]) -> Path:
    """A project copied from *commit* (tagged v0.1.0), with HEAD tagged v0.2.0."""
    skip_unless_in_this_clone(commit)
    template = TemplateRepo(tmp_path / "template")
    template.release("v0.1.0", commit=commit)
    template.release("v0.2.0")
    return copy_project(
        template,
        tmp_path / "project",
        "v0.1.0",
        resources=resources,
        async_support=True,
        docs=False,
    )


def _add_user_code(project: Path) -> tuple[dict[Path, list[str]], list[Path]]:
    """A function of the user's below the markers of ``helpers``, ``testing`` and
    ``files``, each with a test file of the user's; committed."""
    kept: dict[Path, list[str]] = {}
    own_tests = []
    for name in ("helpers", "testing", "files"):
        path = module(project, name)
        kept[path] = [append_text(path, user_function(f"user_{name}_helper"))]
        own_tests.append(add_user_test_file(project, name, f"user_{name}_helper"))
    commit_all(project, "User edits")
    return kept, own_tests


def test_update_moves_the_core_into_the_runtime(
    tmp_path: Path, check_project: Callable[[Path], None]
) -> None:
    """Path 11: a project generated before the runtime existed updates to it cleanly.

    The core modules ``_resource.py`` and ``_cleanup.py`` go; ``_runtime/`` arrives;
    ``helpers``, ``testing``, ``errors`` and ``pytest_plugin`` stay where users import
    them from, now naming the runtime's tools.  Code the user added below the markers
    of ``helpers.py``, ``testing.py`` and a resource module merges with no conflict,
    and the user's own tests, which import from the public modules, still pass.
    """
    project = _project_from(tmp_path, BEFORE_RUNTIME, ["file", "lock"])
    assert module(project, "_resource").is_file()
    kept, _ = _add_user_code(project)

    result = update(project, "--defaults")

    assert_merged_cleanly(project, result)
    assert answers(project)["_commit"] == "v0.2.0"
    for gone in ("_resource", "_cleanup"):
        assert not module(project, gone).exists()
    runtime = project / "src" / PACKAGE / registry.RUNTIME
    assert sorted(path.stem for path in runtime.glob("*.py")) == sorted(registry.RUNTIME_MODULES)
    assert_user_code_kept(project, kept)
    commit_all(project, "Update to 0.2.0")
    check_project(project)


BEFORE_RUNTIME_SUITE = "df28549"
"""This repository's main while every project still carried the runtime's own tests."""


def test_update_leaves_the_runtime_tests_to_the_template(
    tmp_path: Path, check_project: Callable[[Path], None]
) -> None:
    """Path 12: a project made while it carried the runtime's tests updates cleanly.

    ``tests/test_testing.py`` and ``tests/test_helpers.py`` go (Copier deletes a
    file the template no longer makes), ``tests/test_toolkit.py`` arrives, and the
    user's code below the markers of ``helpers.py``, ``testing.py`` and a resource
    module, with the user's own tests of it, merges with no conflict and passes.
    """
    project = _project_from(tmp_path, BEFORE_RUNTIME_SUITE, ["file", "sqlite"])
    tests = project / "tests"
    runtime_tests = [tests / "test_testing.py", tests / "test_helpers.py"]
    assert all(path.is_file() for path in runtime_tests)
    kept, own_tests = _add_user_code(project)

    result = update(project, "--defaults")

    assert_merged_cleanly(project, result)
    assert answers(project)["_commit"] == "v0.2.0"
    assert [path.name for path in runtime_tests if path.exists()] == []
    assert (tests / "test_toolkit.py").is_file()
    assert all(path.is_file() for path in own_tests)
    assert_user_code_kept(project, kept)
    commit_all(project, "Update to 0.2.0")
    check_project(project)


BEFORE_STRESS_RUNTIME = "0eca2bc"
"""This repository's main while the stress tier had its own ``tests/stress/toolkit.py``."""


def test_update_moves_the_stress_toolkit_into_the_runtime(
    tmp_path: Path, check_project: Callable[[Path], None]
) -> None:
    """Path 13: a project whose stress tier had its own toolkit updates cleanly.

    ``tests/stress/toolkit.py`` goes (Copier deletes a file the template no longer
    makes, even one the user added lines to below its marker; the closing message
    lists it under ``DELETED:``, and git keeps it); ``_runtime/stress.py`` and
    ``async_stress.py`` arrive, and the stress modules import from them.  A test
    the user appended to a stress module merges with no conflict.
    """
    project = _project_from(tmp_path, BEFORE_STRESS_RUNTIME, ["file", "lock"])
    stress = project / "tests" / "stress"
    toolkit = stress / "toolkit.py"
    assert toolkit.is_file()
    helper = append_text(toolkit, user_function("user_toolkit_helper"))
    test_files = stress / "test_files.py"
    user_test = "\n\ndef test_by_user() -> None:\n    assert True\n"
    kept = {test_files: [append_text(test_files, user_test)]}
    commit_all(project, "User edits")

    result = update(project, "--defaults")

    assert_merged_cleanly(project, result)
    assert not toolkit.exists()
    deleted = result.stderr[result.stderr.index("DELETED:") :]
    assert "\n  tests/stress/toolkit.py\n" in deleted, deleted
    assert helper in git(project, "show", "HEAD:tests/stress/toolkit.py")
    runtime = project / "src" / PACKAGE / registry.RUNTIME
    assert (runtime / "stress.py").is_file()
    assert (runtime / "async_stress.py").is_file()
    for path in stress.glob("*.py"):
        assert ".toolkit" not in path.read_text(encoding="utf-8"), path.name
    assert f"from {PACKAGE}._runtime.stress import (" in test_files.read_text(encoding="utf-8")
    assert_user_code_kept(project, kept)
    commit_all(project, "Update to 0.2.0")
    check_project(project)


CHECKOUT_PIN = "actions/checkout@3d3c42e5aac5ba805825da76410c181273ba90b1 # v7.0.1"
"""Today's pin of checkout in every generated workflow (one pin per action)."""
OLDER_CHECKOUT_PIN = "actions/checkout@" + "a" * 40 + " # v6.0.0"
OTHER_CHECKOUT_PIN = "actions/checkout@" + "b" * 40 + " # v7.0.2"
"""A release Dependabot could propose that the template's next version does not pin."""
CONFLICT = re.compile(r"^<{7} before updating\n(.*?)^>{7} after updating\n", re.M | re.S)
USER_ACTION = "actions/setup-node@" + "c" * 40 + " # v4.0.0"
USER_ACTION_BUMPED = "actions/setup-node@" + "d" * 40 + " # v4.1.0"


def with_older_pins(template: Path) -> None:
    """An older version of today's template: checkout pinned to an older release."""
    for workflow in (template / "template" / ".github" / "workflows").glob("*.jinja"):
        text = workflow.read_text(encoding="utf-8")
        workflow.write_text(text.replace(CHECKOUT_PIN, OLDER_CHECKOUT_PIN), encoding="utf-8")


def workflow_texts(project: Path) -> dict[str, str]:
    folder = project / ".github" / "workflows"
    return {path.name: path.read_text(encoding="utf-8") for path in sorted(folder.glob("*.yml"))}


def bump_pins(project: Path, old: str, new: str) -> list[str]:
    """What a Dependabot pull request does: replace a pin in every workflow holding it."""
    bumped = []
    for name, text in workflow_texts(project).items():
        if old in text:
            path = project / ".github" / "workflows" / name
            path.write_text(text.replace(old, new), encoding="utf-8")
            bumped.append(f".github/workflows/{name}")
    assert bumped, f"no workflow pins {old}"
    return bumped


def test_dependabot_bumps_merge_with_template_updates(
    tmp_path: Path, check_project: Callable[[Path], None]
) -> None:
    """Path 8: what the generated dependabot.yml lets Dependabot change merges cleanly.

    Dependabot may bump the actions of the user's own workflows and ``uv.lock``;
    the pins of the template's actions and pyproject's ranges it leaves alone
    (``ignore``, ``lockfile-only``), and the next template version moves them.
    """
    template = TemplateRepo(tmp_path / "template")
    template.release("v1.0.0", with_older_pins)
    template.release("v1.1.0")
    project = copy_project(template, tmp_path / "project", "v1.0.0", resources=[], docs=True)
    config = yaml.safe_load((project / ".github" / "dependabot.yml").read_text(encoding="utf-8"))
    by_ecosystem = {update["package-ecosystem"]: update for update in config["updates"]}
    ignored = {entry["dependency-name"] for entry in by_ecosystem["github-actions"]["ignore"]}
    used = {
        line.split("uses:")[1].strip().split("@")[0]
        for text in workflow_texts(project).values()
        for line in text.splitlines()
        if "uses:" in line
    }
    assert used <= ignored, "Dependabot would bump a template-owned pin"
    assert by_ecosystem["uv"]["versioning-strategy"] == "lockfile-only"
    # The user's own workflow and lock file, then the bumps Dependabot proposes.
    own_workflow = project / ".github" / "workflows" / "site-preview.yml"
    own_workflow.write_text(
        "name: Site preview\non: workflow_dispatch\npermissions: {}\njobs:\n  preview:\n"
        "    runs-on: ubuntu-latest\n    permissions:\n      contents: read\n    steps:\n"
        f"      - uses: {USER_ACTION}\n",
        encoding="utf-8",
    )
    lock = project / "uv.lock"
    lock.write_text('version = 1\n\n[[package]]\nname = "psutil"\nversion = "7.0.0"\n', "utf-8")
    commit_all(project, "Our workflow and uv.lock")
    edit(own_workflow, USER_ACTION, USER_ACTION_BUMPED)
    edit(lock, 'version = "7.0.0"', 'version = "7.1.0"')
    commit_all(project, "Bump the actions group and the python-packages group (Dependabot)")

    result = update(project, "--defaults")

    assert_merged_cleanly(project, result)
    texts = workflow_texts(project)
    for name in ("ci.yml", "docs.yml", "release.yml"):
        assert CHECKOUT_PIN in texts[name], name
        assert OLDER_CHECKOUT_PIN not in texts[name], name
    assert USER_ACTION_BUMPED in texts["site-preview.yml"]
    assert 'version = "7.1.0"' in lock.read_text(encoding="utf-8")
    check_project(project)


@pytest.mark.parametrize("bumped_to", ["the next version's pin", "another release"])
def test_a_template_pin_bumped_in_the_project(tmp_path: Path, bumped_to: str) -> None:
    """Why Dependabot leaves the template's pins alone: what a bump merged anyway does.

    Bumped to the commit the next template version pins, the update merges (both
    sides made the same change).  Bumped to another release, every workflow with
    that line conflicts on it, and only on it; keeping the template's side resolves it.
    """
    template = TemplateRepo(tmp_path / "template")
    template.release("v1.0.0", with_older_pins)
    template.release("v1.1.0")
    project = copy_project(template, tmp_path / "project", "v1.0.0", resources=[], docs=True)
    new_pin = CHECKOUT_PIN if bumped_to == "the next version's pin" else OTHER_CHECKOUT_PIN
    bumped = bump_pins(project, OLDER_CHECKOUT_PIN, new_pin)
    assert bumped == [f".github/workflows/{n}" for n in ("ci.yml", "docs.yml", "release.yml")]
    commit_all(project, "Bump actions/checkout (Dependabot)")

    result = update(project, "--defaults")

    if new_pin == CHECKOUT_PIN:
        assert_merged_cleanly(project, result)
        return
    assert sorted(unmerged(project)) == bumped
    assert sorted(leftovers(project)) == bumped
    for name in bumped:
        text = (project / name).read_text(encoding="utf-8")
        conflicts = CONFLICT.findall(text)
        assert conflicts, name
        assert all(OTHER_CHECKOUT_PIN in c and CHECKOUT_PIN in c for c in conflicts), name
        git(project, "checkout", "--theirs", "--", name)
        assert CHECKOUT_PIN in (project / name).read_text(encoding="utf-8")
    assert leftovers(project) == []


def template_update_job(project: Path) -> str:
    """The script of the generated CI's template-update job, as GitHub runs it."""
    ci = yaml.safe_load((project / ".github" / "workflows" / "ci.yml").read_text(encoding="utf-8"))
    (step,) = [step for step in ci["jobs"]["template-update"]["steps"] if "run" in step]
    assert step["shell"] == "bash"
    script = step["run"]
    assert isinstance(script, str)
    return script


def test_ci_says_when_a_newer_template_is_out(tmp_path: Path) -> None:
    """Path 9: the weekly job's summary names the newer version and the command.

    The job's script runs as GitHub runs a ``bash`` step (``-e``, ``pipefail``),
    with this environment's ``uv`` first on the PATH; its summary file is read
    back.  The command it shows is the README's, and running it updates.
    """
    template = TemplateRepo(tmp_path / "template")
    template.release("v1.0.0")
    project = copy_project(template, tmp_path / "project", resources=[], docs=False)
    script = tmp_path / "template-update.sh"
    summary = tmp_path / "summary.md"

    def job() -> tuple[int, str]:
        script.write_text(template_update_job(project), encoding="utf-8")
        summary.write_text("", encoding="utf-8")
        result = run(
            ["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)],
            project,
            check=False,
            env={"PATH": f"{BIN}:{os.environ['PATH']}", "GITHUB_STEP_SUMMARY": str(summary)},
        )
        return result.returncode, summary.read_text(encoding="utf-8")

    assert job() == (0, "### This project is on the template's newest version, 1.0.0\n")
    template.release("v1.1.0")
    code, text = job()
    assert code == 0
    assert text.startswith("### Template 1.1.0 is out (this project: 1.0.0)\n")
    assert f"The template: `{template.path}`." in text
    (command,) = re.findall(r"^```console\n(.*)\n```$", text, re.M)
    readme = (project / "README.md").read_text(encoding="utf-8")
    assert f"\n{command}\n" in readme, "the README's update command, exactly"
    result = run(
        ["bash", "-c", f"{command} --defaults"],
        project,
        env={"PATH": f"{BIN}:{os.environ['PATH']}"},
    )
    assert_merged_cleanly(project, result)
    commit_all(project, "Update to 1.1.0")
    assert job() == (0, "### This project is on the template's newest version, 1.1.0\n")

    # A project generated from a path on another machine: said, not failed.
    edit(project / ".copier-answers.yml", str(template.path), "/home/someone/resource-template")
    commit_all(project, "The template's path on the machine that generated the project")
    code, text = job()
    assert code == 0
    assert text.startswith("### No check: the template is a path on the machine")
    assert "`/home/someone/resource-template`" in text
    # A URL that cannot be read fails the job, with Copier's last words.
    edit(project / ".copier-answers.yml", "/home/someone/resource-template", "file:///no/such.git")
    commit_all(project, "A template URL that cannot be read")
    code, text = job()
    assert code == 1
    assert text.startswith("### No check: copier could not read the template at `file:///")
    assert "```text\n" in text


EVERY_OFFERED = "every resource the earlier commit offers"
"""Stands for the keys of ``offered_resources(commit)``: a commit offers fewer than today."""

HONEST_ANSWERS: dict[str, dict[str, object]] = {
    "every-resource-async-docs": {
        "resources": EVERY_OFFERED,
        "async_support": True,
        "docs": True,
    },
    "defaults": {},
    "no-resource-no-docs-3.12-apache": {
        "resources": [],
        "docs": False,
        "python_min": "3.12",
        "license": "Apache-2.0",
    },
    "lock-subprocess-async-no-license": {
        "resources": ["lock", "subprocess"],
        "async_support": True,
        "docs": False,
        "license": "none",
    },
}
"""Answer sets for the update-honesty test: all, the defaults, none, a mix."""

EARLIER_COMMITS = {
    BEFORE_RUNTIME_SUITE: ["defaults"],
    BEFORE_RUNTIME: list(HONEST_ANSWERS),
    BASELINE: ["every-resource-async-docs", "defaults"],
}
"""Commits a project is generated from, each with the answer sets it is tried with."""


def tree(project: Path) -> dict[str, tuple[bytes, bool]]:
    """Every file of *project* but git's own: its bytes, and whether it is executable."""
    return {
        path.relative_to(project).as_posix(): (path.read_bytes(), os.access(path, os.X_OK))
        for path in sorted(project.rglob("*"))
        if path.is_file() and ".git" not in path.relative_to(project).parts
    }


@pytest.fixture(scope="module")
def releases(tmp_path_factory: pytest.TempPathFactory) -> dict[str, TemplateRepo]:
    """A template repository per earlier commit: v0.1.0 is that commit, v0.2.0 today's."""
    found = {}
    for commit in EARLIER_COMMITS:
        if not in_this_clone(commit):
            continue
        template = TemplateRepo(tmp_path_factory.mktemp("honest") / f"template-{commit}")
        template.release("v0.1.0", commit=commit)
        template.release("v0.2.0")
        found[commit] = template
    return found


@pytest.mark.parametrize(
    ("commit", "answer_set"),
    [(commit, name) for commit, names in EARLIER_COMMITS.items() for name in names],
)
def test_an_update_without_edits_equals_a_fresh_render(
    tmp_path: Path, releases: dict[str, TemplateRepo], commit: str, answer_set: str
) -> None:
    """Path 10: update honesty, the strictest anchor.

    A project generated from an earlier commit and updated to today's template,
    with no edit of its own, is file for file and byte for byte (and mode for
    mode) the project a fresh copy of today's template gives with the same answers:
    an update leaves nothing of the old version behind and misses nothing of the
    new one.  From ``df28549`` (before the runtime's tests left the projects) with
    the defaults, from ``385f9dc`` (before the core moved into ``_runtime/``) with
    four answer sets, from ``62a75d1`` with the defaults.
    """
    if commit not in releases:
        pytest.skip(
            f"commit {commit} is not in this clone (a shallow clone?): "
            "fetch the full history to test the update from it"
        )
    template = releases[commit]
    answers_given = dict(HONEST_ANSWERS[answer_set])
    if answers_given.get("resources") == EVERY_OFFERED:
        answers_given["resources"] = offered_resources(commit)
    updated = copy_project(template, tmp_path / "updated", "v0.1.0", **answers_given)
    assert answers(updated)["_commit"] == "v0.1.0"
    generated = tree(updated)

    result = update(updated, "--defaults")

    assert_merged_cleanly(updated, result)
    assert answers(updated)["_commit"] == "v0.2.0"
    fresh = copy_project(template, tmp_path / "fresh", "v0.2.0", **answers_given)
    before, after = tree(fresh), tree(updated)
    assert generated != before, "the two versions render alike: nothing to test"
    assert sorted(after.keys() - before.keys()) == [], "left behind by the update"
    assert sorted(before.keys() - after.keys()) == [], "missing after the update"
    differ = sorted(name for name in before if before[name] != after[name])
    assert differ == [], "not what a fresh copy writes"
    folders = [path for path in updated.rglob("*") if path.is_dir()]
    empty = [
        path.relative_to(updated).as_posix()
        for path in folders
        if ".git" not in path.relative_to(updated).parts and not any(path.iterdir())
    ]
    assert empty == [], "empty folders left behind"
