"""What the update tests share: a template repository whose commits are versions,
projects copied and updated through Copier's command line, and the user's edits.

Tags do not travel with a clone of this repository, so no test reads the checkout's
tags: each test builds its own temporary template repository and tags its commits.
Git runs with an identity of its own (CI machines have none).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import yaml

from tests.conftest import BIN, TEMPLATE_PARTS, copy_template, tool_env
from tests.matrix import PACKAGE, ROOT

if TYPE_CHECKING:
    from collections.abc import Callable

sys.path.insert(0, str(ROOT / "extensions"))

import template as extension  # extensions/ is not a package

GIT_IDENTITY = {
    "GIT_AUTHOR_NAME": "Template Tests",
    "GIT_AUTHOR_EMAIL": "tests@example.com",
    "GIT_COMMITTER_NAME": "Template Tests",
    "GIT_COMMITTER_EMAIL": "tests@example.com",
}
EXPORTS_MARKER = (
    "    # Your own exports go below this line: template updates add theirs above it.\n"
)
CODE_MARKER = (
    "# Your own code goes below this line: template updates change only what is above it.\n"
)
README_MARKER = "<!-- Your own sections go below this line: template updates write above it. -->"
BASE_ANSWERS: dict[str, Any] = {
    "project_name": "Update Project",
    "package_name": PACKAGE,
    "author_name": "Update Tests",
    "author_email": "tests@example.com",
    "license": "MIT",
    "copyright_year": "2025",
    "python_min": "3.11",
}


def run(
    command: list[str],
    cwd: Path,
    *,
    check: bool = True,
    timeout: float = 600,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run *command* with the tools' environment (plus *env*) and a git identity."""
    result = subprocess.run(
        command,
        cwd=cwd,
        env={**tool_env(), **GIT_IDENTITY, **(env or {})},
        stdin=subprocess.DEVNULL,  # no terminal: Copier must not need to ask anything
        capture_output=True,
        text=True,
        check=False,
        timeout=timeout,
    )
    if check and result.returncode != 0:
        raise AssertionError(
            f"{command} failed in {cwd} (exit {result.returncode}):\n"
            f"{result.stdout[-4000:]}\n{result.stderr[-4000:]}"
        )
    return result


def in_this_clone(commit: str) -> bool:
    """Whether this repository's clone holds *commit* (a shallow clone may not)."""
    return run(["git", "cat-file", "-e", f"{commit}^{{commit}}"], ROOT, check=False).returncode == 0


def offered_resources(commit: str) -> list[str]:
    """The keys the ``resources`` question of this repository's *commit* offers, in order.

    An older template knows fewer resources than today's registry: a project made
    from it can only have chosen these.  Before the registry made the choices,
    ``copier.yml`` listed them (title: key); since, its ``extensions/registry.py``
    has them, one ``key=`` per entry.
    """
    questions = yaml.safe_load(git(ROOT, "show", f"{commit}:copier.yml"))
    choices = questions["resources"]["choices"]
    if isinstance(choices, dict):
        return [str(key) for key in choices.values()]
    entries = git(ROOT, "show", f"{commit}:extensions/registry.py")
    return re.findall(r'^ +key="([a-z_]+)",$', entries, flags=re.MULTILINE)


def skip_unless_in_this_clone(commit: str) -> None:
    if not in_this_clone(commit):
        pytest.skip(
            f"commit {commit} is not in this clone (a shallow clone?): "
            "fetch the full history to test the update from it"
        )


def git(cwd: Path, *args: str) -> str:
    return run(["git", *args], cwd).stdout


def copier(cwd: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """Copier's command line, as a user runs it (``--trust``: the template has extensions)."""
    return run([str(BIN / "copier"), *args], cwd, check=check)


def edit(path: Path, old: str, new: str, count: int = 1) -> None:
    """Replace *old* by *new* in *path*, which must hold *old* exactly *count* times."""
    text = path.read_text(encoding="utf-8")
    assert text.count(old) == count, f"{path}: expected {old!r} {count} time(s)"
    path.write_text(text.replace(old, new), encoding="utf-8")


class TemplateRepo:
    """A temporary git repository of the template; each release is a tagged commit."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.mkdir(parents=True)
        git(path, "init", "-q", "-b", "main")

    def release(
        self,
        tag: str,
        change: Callable[[Path], None] | None = None,
        *,
        commit: str | None = None,
    ) -> None:
        """Commit the working tree's template (or this repository's *commit*), tag it.

        *change*, if given, edits the template in the repository before the commit:
        that is how a test makes an older version, or a newer one, of today's template.
        """
        for part in TEMPLATE_PARTS:
            target = self.path / part
            if target.is_dir():
                shutil.rmtree(target)
            else:
                target.unlink(missing_ok=True)
        if commit is None:
            copy_template(self.path)
        else:
            archive = subprocess.run(
                ["git", "archive", "--format=tar", commit, *TEMPLATE_PARTS],
                cwd=ROOT,
                capture_output=True,
                check=True,
            ).stdout
            subprocess.run(["tar", "-x", "-C", str(self.path)], input=archive, check=True)
        if change is not None:
            change(self.path)
        git(self.path, "add", "-A")
        git(self.path, "commit", "-q", "--allow-empty", "-m", f"Template {tag}")
        git(self.path, "tag", tag)


def copy_project(
    template: TemplateRepo | Path, destination: Path, vcs_ref: str | None = None, **answers: Any
) -> Path:
    """``copier copy`` from the template repository, then a first commit, as a user does."""
    source = template.path if isinstance(template, TemplateRepo) else template
    data = destination.parent / f"{destination.name}-answers.yml"
    data.write_text(yaml.safe_dump({**BASE_ANSWERS, **answers}), encoding="utf-8")
    ref = [f"--vcs-ref={vcs_ref}"] if vcs_ref else []
    copier(
        destination.parent,
        "copy",
        "--trust",
        "--defaults",
        "--data-file",
        str(data),
        *ref,
        str(source),
        str(destination),
    )
    git(destination, "init", "-q", "-b", "main")
    commit_all(destination, "Generate from the template")
    return destination


def commit_all(project: Path, message: str) -> None:
    git(project, "add", "-A")
    git(project, "commit", "-q", "-m", message)


def update(project: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return copier(project, "update", "--trust", *args, check=check)


def answers(project: Path) -> dict[str, Any]:
    loaded = yaml.safe_load((project / ".copier-answers.yml").read_text(encoding="utf-8"))
    assert isinstance(loaded, dict)
    return loaded


def leftovers(project: Path) -> list[str]:
    """Files with conflict markers, and ``*.rej``/``*.orig`` files (what the message lists)."""
    return extension.update_leftovers(project)


def unmerged(project: Path) -> list[str]:
    """Files git records as conflicted (``UU``) after an update."""
    return git(project, "diff", "--name-only", "--diff-filter=U").split()


def assert_merged_cleanly(project: Path, result: subprocess.CompletedProcess[str]) -> None:
    """No conflict in git's index, no conflict marker or ``*.rej`` file, and Copier said so."""
    assert unmerged(project) == []
    assert leftovers(project) == []
    assert "Update done: no conflict markers" in result.stderr, result.stderr[-3000:]


def module(project: Path, name: str) -> Path:
    return project / "src" / PACKAGE / f"{name}.py"


def user_function(name: str) -> str:
    return (
        f"\n\ndef {name}() -> str:\n"
        f'    """Return a value only the user\'s own code returns."""\n'
        f'    return "{name} is user code"\n'
    )


def add_user_function(project: Path, module_name: str) -> str:
    """Append a function to a generated module and export it below the marker."""
    name = f"user_{module_name}_helper"
    path = module(project, module_name)
    text = path.read_text(encoding="utf-8")
    assert text.count(EXPORTS_MARKER) == 1, f"{path} has no exports marker"
    assert text.endswith(CODE_MARKER), f"{path} does not end with the code marker"
    text = text.replace(EXPORTS_MARKER, f'{EXPORTS_MARKER}    "{name}",\n')
    path.write_text(text + user_function(name), encoding="utf-8")
    return name


def add_user_test_file(project: Path, module_name: str, function: str) -> Path:
    """A test file of the user's own, for a function they added."""
    path = project / "tests" / f"test_user_{module_name}.py"
    path.write_text(
        f'"""The user\'s own tests."""\n\n'
        f"from {PACKAGE}.{module_name} import {function}\n\n\n"
        f"def test_{function}() -> None:\n"
        f'    assert {function}() == "{function} is user code"\n',
        encoding="utf-8",
    )
    return path


def append_text(path: Path, text: str) -> str:
    path.write_text(path.read_text(encoding="utf-8") + text, encoding="utf-8")
    return text


def assert_user_code_kept(project: Path, expected: dict[Path, list[str]]) -> None:
    for path, snippets in expected.items():
        text = path.read_text(encoding="utf-8")
        for snippet in snippets:
            assert snippet in text, f"user edit lost from {path.relative_to(project)}: {snippet!r}"


def exported_names(path: Path) -> list[str]:
    match = re.search(r"^__all__(?:: list\[str\])? = \[(.*?)^\]", path.read_text(), re.M | re.S)
    assert match, f"no __all__ in {path}"
    return re.findall(r'"(\w+)"', match.group(1))
