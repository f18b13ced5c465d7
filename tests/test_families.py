"""The decomposition of a family's package checks (``tests/families.py``) keeps their power.

Every family that is no anchor must be a projection of its anchors (or the matrix
would check it whole, and take as long as before); a family that differs from
the projection in any way, by a line, a file or a mode, must be checked whole;
and a fault planted where only a combination of resources shows it is found.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

import pytest

from tests.conftest import copy_template
from tests.families import (
    BATCH_SIZE,
    SAMPLED_FAMILIES,
    FamilyChecks,
    aligned_lines,
    anchors_of,
    in_scope,
    is_anchor,
    projected,
    projection_problems,
    sampled_families,
    split_matrix,
)
from tests.matrix import PACKAGE, Combination, all_subsets, full_matrix, registry
from tests.rendering import ProjectFolder, TemplateRenderer, add_capture

if TYPE_CHECKING:
    import subprocess
    from collections.abc import Callable
    from pathlib import Path

    from pytest_copie.plugin import Copie

    RunTool = Callable[..., subprocess.CompletedProcess[str]]

ALL = tuple(resource.key for resource in registry.RESOURCES)
INIT = f"src/{PACKAGE}/__init__.py"


def test_anchors_are_no_resource_each_one_alone_and_all() -> None:
    combo = Combination(("file", "lock"), True, False)
    anchors = anchors_of(combo, ALL)
    assert [anchor.resources for anchor in anchors] == [("file",), ("lock",), ALL]
    assert {(a.async_support, a.docs) for a in anchors} == {(True, False)}
    assert all(is_anchor(anchor, ALL) for anchor in anchors)
    assert not is_anchor(combo, ALL)
    assert is_anchor(Combination(("file", "lock"), True, False, python_min="3.12"), ALL)


def test_the_sample_is_drawn_among_non_anchors_and_rotates() -> None:
    first, second = sampled_families(ALL, 1), sampled_families(ALL, 2)
    assert len(first) == 2 * SAMPLED_FAMILIES
    assert first != second
    by_id = {combo.family: combo for combo in map(_family, first)}
    assert not any(is_anchor(combo, ALL) for combo in by_id.values())
    assert {combo.async_support for combo in by_id.values()} == {False, True}


def _family(family: str) -> Combination:
    names, mode = family.rsplit("-", 1)
    resources = () if names == "none" else tuple(names.split("+"))
    return Combination(resources, mode == "async", False)


def test_aligned_lines_match_a_resources_block_where_the_template_put_it() -> None:
    union = [b"A = [\n", b'    "x",\n', b"    ],\n", b"B = [\n", b'    "y",\n', b"    ],\n"]
    second = [b"B = [\n", b'    "y",\n', b"    ],\n"]
    assert aligned_lines(second, union) == [(0, 3), (1, 4), (2, 5)]
    # Blank lines go with the definition after them.
    union = [b"x = 1\n", b"\n", b"\n", b"def a(): ...\n", b"\n", b"\n", b"def b(): ...\n"]
    only_b = [b"x = 1\n", b"\n", b"\n", b"def b(): ...\n"]
    assert [index for _, index in aligned_lines(only_b, union)] == [0, 4, 5, 6]
    assert projected(b"".join(union), (b"".join(only_b),)) == b"".join(only_b)


def test_a_projection_is_a_subsequence_of_the_union() -> None:
    union = b"a\nb\na\nc\nb\n"
    for anchor in (b"a\n", b"b\na\n", b"x\nc\n", b"", union):
        lines = projected(union, (anchor,)).splitlines(keepends=True)
        remaining = iter(union.splitlines(keepends=True))
        assert all(line in remaining for line in lines)


def test_every_difference_from_the_projection_is_found() -> None:
    none = {"src/p/__init__.py": (b"__all__ = []\n", 0o644)}
    one = {
        "src/p/__init__.py": (b"from p.a import A\n__all__ = [\n  'A',\n]\n", 0o644),
        "src/p/a.py": (b"A = 1\n", 0o644),
    }
    two = {
        "src/p/__init__.py": (b"from p.b import B\n__all__ = [\n  'B',\n]\n", 0o644),
        "src/p/b.py": (b"B = 1\n", 0o644),
    }
    union = {
        "src/p/__init__.py": (
            b"from p.a import A\nfrom p.b import B\n__all__ = [\n  'A',\n  'B',\n]\n",
            0o644,
        ),
        "src/p/a.py": (b"A = 1\n", 0o644),
        "src/p/b.py": (b"B = 1\n", 0o644),
    }
    assert projection_problems(union, union, [none, one, two]) == []
    assert projection_problems(one, union, [none, one]) == []
    planted = {
        "a line two make together": {
            **union,
            "src/p/__init__.py": (union["src/p/__init__.py"][0] + b"X = 1\n", 0o644),
        },
        "a line left out": {
            **union,
            "src/p/__init__.py": (b"from p.a import A\n__all__ = [\n  'A',\n  'B',\n]\n", 0o644),
        },
        "lines in another order": {
            **union,
            "src/p/__init__.py": (
                b"from p.b import B\nfrom p.a import A\n__all__ = [\n  'A',\n  'B',\n]\n",
                0o644,
            ),
        },
        "a file no anchor has": {**union, "src/p/c.py": (b"C = 1\n", 0o644)},
        "a file missing": {k: v for k, v in union.items() if k != "src/p/b.py"},
        "another mode": {**union, "src/p/a.py": (b"A = 1\n", 0o755)},
    }
    for what, family in planted.items():
        assert projection_problems(family, union, [none, one, two]) != [], what
    # Files the decomposed checks do not read are not compared.
    assert not in_scope("README.md")
    assert (
        projection_problems({**union, "README.md": (b"x\n", 0o644)}, union, [none, one, two]) == []
    )


@pytest.mark.slow
@pytest.mark.parametrize("async_support", [False, True])
@pytest.mark.parametrize("docs", [False, True])
def test_every_family_is_a_projection_of_its_anchors(
    renderers: Callable[[Combination], TemplateRenderer], async_support: bool, docs: bool
) -> None:
    """What makes the package checks run per anchor, not per family: a template change
    that breaks it fails here, naming the file, instead of slowing the matrix down."""

    def tree(subset: tuple[str, ...]) -> dict[str, tuple[bytes, int]]:
        combo = Combination(subset, async_support, docs)
        return renderers(combo).files(combo.answers())

    union, none = tree(ALL), tree(())
    alone = {key: tree((key,)) for key in ALL}
    failing: dict[str, list[str]] = {}
    for subset in all_subsets(ALL):
        if is_anchor(Combination(subset, async_support, docs), ALL):
            continue
        anchors = [none, *(alone[key] for key in subset)]
        for problem in projection_problems(tree(subset), union, anchors):
            failing.setdefault(problem, []).append("+".join(subset))
    assert {problem: len(families) for problem, families in failing.items()} == {}


@pytest.fixture(scope="module")
def planted_renderer(
    copie_session: Copie, tmp_path_factory: pytest.TempPathFactory
) -> TemplateRenderer:
    """A renderer of the template with a line that two resources make only without a third."""
    template = copy_template(tmp_path_factory.mktemp("planted"))
    add_capture(template)
    init = template / "template" / "src" / "{{ package_name }}" / "__init__.py.jinja"
    init.write_text(
        init.read_text(encoding="utf-8")
        + "{% if 'file' in resources and 'lock' in resources and 'sqlite' not in resources %}"
        "\nPLANTED: int = 'only file and lock, without sqlite, make this line'"
        "{% endif %}\n",
        encoding="utf-8",
    )

    def copy(answers: dict[str, Any]) -> Path:
        result = copie_session.copy(extra_answers=answers, template_dir=template)
        assert result.exit_code == 0
        assert result.project_dir is not None
        return result.project_dir

    return TemplateRenderer(template, Combination((), False, False).answers(), copy)


@pytest.mark.slow
def test_a_fault_only_a_combination_shows_is_checked_whole(
    planted_renderer: TemplateRenderer,
    run_preloaded: RunTool,
    tmp_path: Path,
) -> None:
    """The decomposition hands the family to a whole check, and mypy finds the fault there."""
    keys = ("file", "sqlite", "lock")

    def files(combo: Combination) -> dict[str, tuple[bytes, int]]:
        return planted_renderer.files(combo.answers())

    checks = FamilyChecks(keys, 0, files, ProjectFolder(tmp_path / "anchor"))
    checks.sampled = frozenset()
    verdicts = {
        subset: checks.decomposes(combo, files(combo))
        for subset in all_subsets(keys)
        if not is_anchor(combo := Combination(subset, False, False), keys)
    }
    assert verdicts == {("file", "sqlite"): True, ("file", "lock"): False, ("sqlite", "lock"): True}
    planted = Combination(("file", "lock"), False, False)
    problems = checks.problems(planted, files(planted))
    assert problems == [f"{INIT}: not the union's lines that its anchors hold"]
    project = ProjectFolder(tmp_path / "whole").hold(files(planted))
    with pytest.raises(pytest.fail.Exception) as failure:
        run_preloaded(project, "mypy", "--cache-dir", str(tmp_path / "mypy-cache"))
    assert re.search(r"__init__\.py:\d+: error: Incompatible types", str(failure.value))


def test_a_sampled_familys_failure_names_the_premise(tmp_path: Path) -> None:
    combo = Combination(("file", "lock"), False, False)
    tree = {"src/p/__init__.py": (b"x = 1\n", 0o644)}
    checks = FamilyChecks(ALL, 7, lambda anchor: tree, ProjectFolder(tmp_path / "anchor"))
    checks.sampled = frozenset({combo.family})
    with (
        pytest.raises(pytest.fail.Exception, match="refutes the premise"),
        checks.whole(combo, tree),
    ):
        pytest.fail("mypy found an error")
    checks.sampled = frozenset()
    with (
        pytest.raises(pytest.fail.Exception, match=r"^mypy found an error$"),
        checks.whole(combo, tree),
    ):
        pytest.fail("mypy found an error")


def test_the_matrix_is_split_into_tests_of_their_own_and_batches() -> None:
    """Each combination once: the anchors, the sampled families and the other bases
    alone (they run the tools), every other combination in a batch, twins together."""
    matrix = full_matrix()
    sampled = sampled_families(ALL, 3)
    alone, batches = split_matrix(matrix, ALL, sampled)
    batched = [combo for batch in batches for combo in batch.combinations]
    assert sorted(c.id for c in [*alone, *batched]) == sorted(c.id for c in matrix)
    assert all(is_anchor(c, ALL) or c.family in sampled for c in alone)
    assert not any(is_anchor(c, ALL) or c.family in sampled for c in batched)
    assert {c.family for c in batched}.isdisjoint({c.family for c in alone})
    assert all(len(batch.combinations) <= BATCH_SIZE for batch in batches)
    assert len({batch.id for batch in batches}) == len(batches)
    for first, second in zip(batched[::2], batched[1::2], strict=True):
        assert (first.family, first.docs, second.docs) == (second.family, True, False)
