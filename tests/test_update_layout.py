"""The parts of ``copier update`` support that need no update: fast checks.

The update tests (``tests/test_update.py``) run Copier on a few resources.  Here the
layout that makes updates merge is checked for every generated module, with the same
three-way merge Copier falls back to (``git merge-file``); the conflict report of the
generated suite and of Copier's closing message is checked on a made-up tree; and a
copy from a relative path is refused.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import copier
import jinja2
import pytest
import yaml
from packaging.version import Version

import template as extension  # extensions/template.py (tests.matrix puts it on the path)
from tests.conftest import BIN, run_in, tool_env
from tests.matrix import DEFAULT_ANSWERS, PACKAGE, ROOT, TEMPLATE_RUNTIME, registry
from tests.updating import CODE_MARKER, EXPORTS_MARKER, user_function

if TYPE_CHECKING:
    from collections.abc import Iterator

ALL_RESOURCES = [resource.key for resource in registry.RESOURCES]
# pre-commit's check-merge-conflict flags lines that start with these.
MERGE_CONFLICT_STARTS = (b"<<<<<<< ", b"======= ", b"=======\n", b">>>>>>> ", b"=======\r\n")


def test_template_files_hold_no_conflict_markers() -> None:
    """So a fresh project passes pre-commit's check-merge-conflict and our own test."""
    found = []
    for path in sorted(p for part in ("template", "extensions") for p in (ROOT / part).rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts:
            for number, line in enumerate(path.read_bytes().splitlines(keepends=True), 1):
                if line.startswith(MERGE_CONFLICT_STARTS) or line.rstrip() in (b"<" * 7, b">" * 7):
                    found.append(f"{path.relative_to(ROOT)}:{number}")
    assert found == []


KNOWN_CONFLICTS: dict[tuple[str, str], list[str]] = {
    ("sync", "async"): [],
    ("async", "sync"): [],
    ("no-lock", "sync"): [],
    ("async", "newer-end"): [],
}


def _render(template: Path, destination: Path, **answers: Any) -> Path:
    copier.run_copy(
        str(template),
        destination,
        data={**DEFAULT_ANSWERS, "docs": False, **answers},
        defaults=True,
        unsafe=True,
        quiet=True,
    )
    return destination


@pytest.fixture(scope="module")
def renders(tmp_path_factory: pytest.TempPathFactory, template_snapshot: Path) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("layout")
    return {
        "sync": _render(template_snapshot, base / "sync", resources=ALL_RESOURCES),
        "async": _render(
            template_snapshot, base / "async", resources=ALL_RESOURCES, async_support=True
        ),
        "no-lock": _render(
            template_snapshot, base / "no-lock", resources=[r for r in ALL_RESOURCES if r != "lock"]
        ),
    }


def _python_files(project: Path) -> Iterator[Path]:
    for folder in ("src", "tests"):
        yield from sorted((project / folder).rglob("*.py"))


def _with_user_code(text: str, name: str) -> str:
    """*text* with the user's typical additions: a function at the end, its export."""
    if EXPORTS_MARKER in text:
        text = text.replace(EXPORTS_MARKER, f'{EXPORTS_MARKER}    "{name}",\n')
    return text + user_function(name)


def _merge(base: str, ours: str, theirs: str, folder: Path) -> tuple[int, str]:
    """``git merge-file``, as Copier runs it on a hunk ``git apply`` rejected."""
    paths = []
    for label, text in (("ours", ours), ("base", base), ("theirs", theirs)):
        paths.append(folder / label)
        paths[-1].write_text(text, encoding="utf-8")
    result = subprocess.run(
        ["git", "merge-file", "-p", *map(str, paths)],
        capture_output=True,
        text=True,
        check=False,
    )
    return result.returncode, result.stdout


def _newer_end(text: str) -> str | None:
    """*text* as a newer version might write it: its last line of code changed."""
    if not text.endswith(CODE_MARKER):
        return None
    head, tail = text[: -len(CODE_MARKER)].rstrip("\n").rsplit("\n", 1)
    return f"{head}\n{tail}  # changed by a newer version\n\n\n{CODE_MARKER}"


@pytest.mark.parametrize(
    ("before", "after"),
    [("sync", "async"), ("async", "sync"), ("no-lock", "sync"), ("async", "newer-end")],
)
def test_template_additions_miss_user_additions(
    renders: dict[str, Path], tmp_path: Path, before: str, after: str
) -> None:
    """In every module: code at the end and names below the marker merge with the change.

    The change is async_support turned on or off, a resource added (``lock``, whose
    names sort last in ``__init__.__all__``), or a newer version that rewrites the
    last line of code above the marker that ends a module.  A module is merged three
    ways: the render before, the user's edit of it, the render after.
    """
    conflicts = []
    merged_files = 0
    for old in _python_files(renders[before]):
        relative = old.relative_to(renders[before])
        base = old.read_text(encoding="utf-8")
        if after == "newer-end":
            newer = _newer_end(base)
            if newer is None:
                continue
            theirs = newer
        elif (renders[after] / relative).exists():
            theirs = (renders[after] / relative).read_text(encoding="utf-8")
        else:
            continue
        name = f"user_{old.stem.strip('_')}_helper"
        ours = _with_user_code(base, name)
        conflicted, merged = _merge(base, ours, theirs, tmp_path)
        merged_files += 1
        if conflicted or merged != _with_user_code(theirs, name):
            conflicts.append(str(relative))
    assert merged_files >= 2 * (len(registry.RESOURCES) + 1)  # at least the marked ones
    assert conflicts == KNOWN_CONFLICTS[before, after]


def test_every_public_module_has_the_exports_marker(renders: dict[str, Path]) -> None:
    src = renders["async"] / "src" / PACKAGE
    modules = [resource.module for resource in registry.RESOURCES] + ["__init__"]
    for name in modules:
        text = (src / f"{name}.py").read_text(encoding="utf-8")
        assert text.count(EXPORTS_MARKER) == 1, name
        assert f"{EXPORTS_MARKER}]\n" in text, f"{name}: the marker closes __all__"


@pytest.mark.parametrize("render", ["sync", "async"])
def test_modules_users_extend_end_with_the_code_marker(
    renders: dict[str, Path], render: str
) -> None:
    project = renders[render]
    modules = [resource.module for resource in registry.RESOURCES] + ["helpers"]
    paths = [project / "src" / PACKAGE / f"{name}.py" for name in modules]
    paths += [project / "tests" / f"test_{name}.py" for name in modules[:-1]]
    paths.append(project / "tests" / "test_toolkit.py")  # helpers' tests are the template's
    stress = project / "tests" / "stress"
    paths.append(stress / "conftest.py")
    paths += [stress / f"test_{name}.py" for name in modules[:-1]]
    for path in paths:
        text = path.read_text(encoding="utf-8")
        assert text.endswith(f"\n\n\n{CODE_MARKER}"), path.name
        assert text.count(CODE_MARKER) == 1, path.name


LEFTOVERS_TEST = ROOT / "template" / "tests" / "test_update_leftovers.py.jinja"
MARKED = "x = 1\n<<<<<<< before updating\nx = 2\n=======\nx = 3\n>>>>>>> after updating\n"


def _tree_with_leftovers(root: Path) -> Path:
    (root / "tests").mkdir(parents=True)
    test = jinja2.Template(LEFTOVERS_TEST.read_text(encoding="utf-8"), keep_trailing_newline=True)
    test.stream(package_name=PACKAGE).dump(str(root / "tests" / LEFTOVERS_TEST.stem))
    runtime = root / "src" / PACKAGE / registry.RUNTIME
    runtime.mkdir(parents=True)
    shutil.copy2(TEMPLATE_RUNTIME / "leftovers.py", runtime)
    (root / "src" / "module.py").write_text(MARKED, encoding="utf-8")
    (root / "README.md").write_text("Title\n=======\n\nText.\n", encoding="utf-8")
    (root / "README.md.rej").write_text("@@ -1 +1 @@\n", encoding="utf-8")
    (root / "docs").mkdir()
    (root / "docs" / "page.md").write_text(">>>>>>> quoted, but no start\n", encoding="utf-8")
    venv = root / ".venv-custom"
    (venv / "lib").mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text("home = /usr\n", encoding="utf-8")
    (venv / "lib" / "vendored.py").write_text(MARKED, encoding="utf-8")
    (root / "logo.png").write_bytes(b"\x89PNG\0\n<<<<<<< \n>>>>>>> \n")
    return root


def test_generated_leftovers_test_names_every_leftover(tmp_path: Path) -> None:
    root = _tree_with_leftovers(tmp_path / "project")
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"]
    failed = run_in(root, command, 120)
    assert failed.returncode == 1, failed.stdout
    report = failed.stdout[failed.stdout.index("copier update left conflicts") :]
    assert re.findall(r"^E +(\S+)$", report, re.M) == ["README.md.rej", "src/module.py:2"]
    # Copier's closing message lists the same files, through the extension.
    assert extension.update_leftovers(root) == ["README.md.rej", "src/module.py"]

    (root / "src" / "module.py").write_text("x = 2\n", encoding="utf-8")
    (root / "README.md.rej").unlink()
    passed = run_in(root, command, 120)
    assert passed.returncode == 0, passed.stdout
    assert extension.update_leftovers(root) == []


@pytest.mark.parametrize(
    "source", ["/abs/template", "~/template", "gh:org/repo", "https://x.org/r.git", "git@host:r"]
)
def test_absolute_paths_and_urls_are_accepted(source: str) -> None:
    assert extension.relative_source_problem(source) == ""


@pytest.mark.parametrize("source", ["template", "./template", "../template"])
def test_relative_paths_are_refused(source: str) -> None:
    problem = extension.relative_source_problem(source)
    assert f"The template source {source!r} is a relative path" in problem
    assert repr(os.path.abspath(source)) in problem


def test_copy_from_a_relative_path_stops_before_writing(
    template_snapshot: Path, tmp_path: Path
) -> None:
    shutil.copytree(template_snapshot, tmp_path / "template")
    (tmp_path / "project").mkdir()
    result = subprocess.run(
        [str(BIN / "copier"), "copy", "--trust", "--defaults", "template", "project"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=tool_env(),
        check=False,
        timeout=120,
    )
    assert result.returncode == 1
    assert "The template source 'template' is a relative path." in result.stderr
    assert f"Give an absolute path (here: '{tmp_path / 'template'}')" in result.stderr
    assert "Traceback" not in result.stderr
    assert list((tmp_path / "project").iterdir()) == []


def test_generated_pre_commit_config_checks_for_conflicts(renders: dict[str, Path]) -> None:
    config = yaml.safe_load((renders["sync"] / ".pre-commit-config.yaml").read_text())
    hooks = {hook["id"]: hook for repo in config["repos"] for hook in repo["hooks"]}
    assert hooks["check-merge-conflict"]["args"] == ["--assume-in-merge"]
    rejections = hooks["copier-rejections"]
    assert rejections["language"] == "fail"
    assert re.search(rejections["files"], "src/pkg/files.py.rej")
    assert not re.search(rejections["files"], "src/pkg/files.py")
    # Copier's docs advise against ignoring them: they are reported instead.
    assert "rej" not in (renders["sync"] / ".gitignore").read_text()


def test_changelog_versions_are_pep440_newest_first() -> None:
    text = (ROOT / "docs" / "changelog.md").read_text(encoding="utf-8")
    headings = re.findall(r"^## \[([^\]]+)\]", text, re.M)
    assert headings[0] == "Unreleased"
    versions = [Version(heading) for heading in headings[1:]]
    assert versions
    assert versions == sorted(versions, reverse=True)
    assert [str(version) for version in versions] == headings[1:]  # written normalized
