"""One copier range and one extension range, stated once, and repeated exactly.

``pyproject.toml``'s ``dev`` group states the range of copier and of
copier-template-extensions that the template is tested with.  Users meet those
ranges in ``copier.yml`` (``_min_copier_version``, which Copier enforces), in the
commands of the READMEs and docs, and in a generated project's README: each must
be that range, never another one, never an unpinned name.  Zensical, 0.x and
still changing its strict mode, is bounded the same way here and in the
generated projects' ``docs`` group.
"""

from __future__ import annotations

import re
import tomllib
from importlib.metadata import version
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from tests.matrix import ROOT

SPEC = r"[<>=!~][^'\"\s`]*"
STATED = re.compile(rf"(?<![\w./-])(copier-template-extensions|copier)({SPEC})")
"""A requirement with a version, wherever it stands: ``copier>=9.15.1,<10``."""
INSTALLED = re.compile(
    r"(?:--from|--with|install|inject\s+copier)\s+(['\"]?)"
    r"(copier-template-extensions|copier)(?![\w-])([^'\"\s`]*)\1"
)
"""A package a command installs: ``--with copier-template-extensions`` needs a range too."""


def dev_requirements() -> dict[str, Requirement]:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    requirements = [Requirement(text) for text in pyproject["dependency-groups"]["dev"]]
    return {requirement.name: requirement for requirement in requirements}


def floor(specifier: SpecifierSet) -> Version:
    (lowest,) = [Version(spec.version) for spec in specifier if spec.operator == ">="]
    return lowest


HISTORY = ROOT / "docs" / "changelog.md"
"""Says what earlier versions stated: not a place users copy a command from."""


def stating_files() -> list[Path]:
    """Where users read install or run commands: READMEs, docs, the template, CI."""
    candidates = [ROOT / "README.md", ROOT / "copier.yml", ROOT / "mkdocs.yml"]
    for folder in ("docs", "template", ".github", ".ci"):
        candidates += sorted((ROOT / folder).rglob("*"))
    return [
        path
        for path in candidates
        if path.is_file() and "__pycache__" not in path.parts and path != HISTORY
    ]


def stated_ranges() -> list[tuple[str, str, str]]:
    """Every (file, package, range) stated in a file users read; ``""``: no range."""
    found: dict[tuple[str, int], tuple[str, str, str]] = {}
    for path in stating_files():
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        name = path.relative_to(ROOT).as_posix()
        for match in STATED.finditer(text):
            found[name, match.start(1)] = (name, match[1], match[2])
        for match in INSTALLED.finditer(text):
            found[name, match.start(2)] = (name, match[2], match[3])
    return list(found.values())


@pytest.mark.parametrize("package", ["copier", "copier-template-extensions", "zensical"])
def test_each_range_has_both_ends_and_holds_the_installed_version(package: str) -> None:
    specifier = dev_requirements()[package].specifier
    assert {spec.operator for spec in specifier} == {">=", "<"}, specifier
    assert specifier.contains(version(package), prereleases=True)


def test_min_copier_version_is_the_floor_of_the_range() -> None:
    config = yaml.safe_load((ROOT / "copier.yml").read_text(encoding="utf-8"))
    minimum = Version(config["_min_copier_version"])
    assert minimum == floor(dev_requirements()["copier"].specifier)
    # Copier's floors for what the template uses: multiselect validators (9.2.0),
    # list answers given as strings (9.8.0), the question named in an "Invalid
    # choice" error, which
    # tests/test_questions.py expects (9.15.1).
    assert minimum >= Version("9.15.1")


def test_every_stated_range_is_the_one_of_pyproject() -> None:
    requirements = dev_requirements()
    found = stated_ranges()
    wrong = [
        (name, package, stated)
        for name, package, stated in found
        if SpecifierSet(stated) != requirements[package].specifier or not stated
    ]
    assert wrong == []
    where = {(name, package) for name, package, _ in found}
    for name in ("README.md", "docs/updating.md", "template/README.md.jinja"):
        assert {(name, "copier"), (name, "copier-template-extensions")} <= where


def test_readme_commands_all_state_the_ranges() -> None:
    """Every command of README that runs copier through uv names both ranges."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    commands = [line for line in readme.splitlines() if " uv tool run " in line]
    assert len(commands) >= 5
    requirements = dev_requirements()
    expected = (
        f"--from 'copier{requirements['copier'].specifier}' --with "
        f"'copier-template-extensions{requirements['copier-template-extensions'].specifier}'"
    )
    for line in commands:
        normalised = re.sub(r"'(copier[\w-]*)([^']*)'", normalise_quoted, line)
        assert expected in normalised, line


def normalise_quoted(match: re.Match[str]) -> str:
    """``'copier<10,>=9.15.1'`` for ``'copier>=9.15.1,<10'``: packaging's own order."""
    return f"'{match[1]}{SpecifierSet(match[2])}'"


def test_generated_projects_bound_zensical_as_the_template_does() -> None:
    text = (ROOT / "template" / "pyproject.toml.jinja").read_text(encoding="utf-8")
    (stated,) = re.findall(r'"(zensical[^"]*)"', text)
    assert Requirement(stated).specifier == dev_requirements()["zensical"].specifier


def test_the_checks_see_an_unpinned_name() -> None:
    """The patterns find what they must refuse (a guard against a pattern that finds none)."""
    text = (
        "uv tool run --from copier --with copier-template-extensions copier copy\n"
        "pipx install copier && pipx inject copier copier-template-extensions\n"
        "uv tool run --from 'copier>=9.10,<10' --with 'copier-template-extensions>=0.3'\n"
    )
    unpinned = [(m[2], m[3]) for m in INSTALLED.finditer(text) if not m[3]]
    assert unpinned == [
        ("copier", ""),
        ("copier-template-extensions", ""),
        ("copier", ""),
        ("copier-template-extensions", ""),
    ]
    assert [(m[1], m[2]) for m in STATED.finditer(text)] == [
        ("copier", ">=9.10,<10"),
        ("copier-template-extensions", ">=0.3"),
    ]
