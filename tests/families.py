"""A family's package checks, decomposed into the checks of its resources.

A *family* is a resource subset with an ``async_support`` answer (and a ``docs``
answer: the two twins share their Python files but one).  Almost every Python file
of a render is the same in every family that has it: a resource's module and tests
have one text per ``async_support``, so their checks run once per variant.  A few
files list the chosen resources: the package's ``__init__.py``,
``tests/test_package.py`` and ``benchmarks/overhead.py``.  They made three checks
run once per family: ``mypy --strict`` on the package, the package test, and ruff
on those files; 512 families with eight resources, 8,192 with twelve.

The decomposition.  For a family F of two resources or more, take its
*anchors*: the family of each resource R of F alone (S_R), and the family of
every resource (U), both with F's other answers.  F is *the projection of U onto
its anchors* when every file those checks read (everything under ``src/``,
``tests/`` and ``benchmarks/``, and ``pyproject.toml``) is, in F, exactly the
lines of U's file that some S_R's file also holds, in U's order, with U's
permission bits, and F has exactly the files that U and some S_R have
(``projection_problems``): F is made of its resources' renders, placed as U
places them, and of nothing else.  Then F's three checks are taken to pass when
the anchors' pass.  The family with no resource is no anchor: what only it has
(an empty ``__all__``, a benchmark with no scenario) is in no other family.

The premise.  Each line a resource brings to a shared file stands on its own:
it names only the runtime, its own module and what the lines every resource
has define, and those shared lines treat each resource's lines alike (an
``__all__`` stays sorted and free of duplicates when names are taken out,
``EXPORTS`` and ``RESOURCES`` list what the same file's other lines import and
measure).  A mistake in one resource's lines shows in S_R; lines of two
resources that clash both sit in U; a line that two resources make only
together, or that a resource's absence leaves, is no projection, and F is
checked whole.  The premise is proven on every run: a rotating sample of
families (``sampled_families``, drawn with the run's ``MATRIX_RENDER_SEED``) is
checked whole although each is a projection, and its failure would name the
premise (``FamilyChecks.whole``); ``tests/test_families.py`` checks that every
family is a projection (or the matrix would slow down without failing), that
every kind of difference from one is found, and plants a fault that only a
combination of resources shows.

The alignment of an anchor's lines with U's is a patience diff
(``aligned_lines``): lines unique in both anchor the match, and between anchors
equal lines are matched from the end for blank lines and from the start for
others (a resource's block in a shared file ends with its closing line and
begins after the blank lines that precede a definition).  An alignment that
picks other equal lines than the template's can only make a family fail to be
a projection, which costs a whole check, never a verdict.
"""

from __future__ import annotations

import bisect
import contextlib
import functools
import random
from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pytest

from tests.matrix import MAIN_BASE, Combination, Files, all_subsets

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Mapping, Sequence
    from pathlib import Path

    from tests.rendering import ProjectFolder

    Tree = Mapping[str, tuple[bytes, int]]
    """A render in memory: each file's path, bytes and permission bits."""

SCOPE = ("src/", "tests/", "benchmarks/")
"""The folders whose files mypy, the package test and ruff's Python checks read."""
SCOPE_FILES = ("pyproject.toml",)
"""Their settings, the project's dependencies among them."""
SAMPLED_FAMILIES = 4
"""Families of each ``async_support`` answer checked whole on every run."""


def in_scope(path: str) -> bool:
    """Whether the decomposed checks read the file at *path* of a render."""
    return path.startswith(SCOPE) or path in SCOPE_FILES


def is_anchor(combo: Combination, keys: tuple[str, ...]) -> bool:
    """Whether *combo* is checked whole as an anchor: not of the main base, or with
    no resource, one, or every resource of the registry cut *keys*."""
    return combo.base() != MAIN_BASE or len(combo.resources) <= 1 or combo.resources == keys


def anchors_of(combo: Combination, keys: tuple[str, ...]) -> tuple[Combination, ...]:
    """Each S_R of *combo*'s resources, then U, with *combo*'s other answers."""
    subsets = [*((key,) for key in combo.resources), keys]
    return tuple(Combination(subset, combo.async_support, combo.docs) for subset in subsets)


def sampled_families(keys: tuple[str, ...], seed: int) -> frozenset[str]:
    """This run's families that are checked whole although they are projections.

    ``SAMPLED_FAMILIES`` of each ``async_support`` answer, drawn with *seed* among
    the families that are no anchor.
    """
    drawn: set[str] = set()
    generator = random.Random(seed)
    for async_support in (False, True):
        candidates = sorted(
            combo.family for combo in _families(keys, async_support) if not is_anchor(combo, keys)
        )
        drawn |= set(generator.sample(candidates, min(SAMPLED_FAMILIES, len(candidates))))
    return frozenset(drawn)


BATCH_SIZE = 64
"""Combinations per batch: enough that a test's own cost is small beside its checks'."""


@dataclass(frozen=True)
class Batch:
    """Combinations checked in one test, one after the other: those of families whose
    package checks are their anchors'.  Each gets every check a combination gets."""

    index: int
    count: int
    combinations: tuple[Combination, ...]

    @property
    def id(self) -> str:
        return f"batch-{self.index + 1:04d}-of-{self.count:04d}"


def split_matrix(
    combos: Sequence[Combination], keys: tuple[str, ...], sampled: frozenset[str]
) -> tuple[list[Combination], list[Batch]]:
    """The combinations that get a test each, and batches of the others.

    A test of its own for every anchor, every family sampled to be checked whole,
    and every combination of another base: they run the tools.  The others, in
    the matrix's order (a family's docs twin first), are batched.
    """
    alone = [c for c in combos if is_anchor(c, keys) or c.family in sampled]
    rest = [c for c in combos if not (is_anchor(c, keys) or c.family in sampled)]
    count = -(-len(rest) // BATCH_SIZE)
    batches = [
        Batch(index, count, tuple(rest[index * BATCH_SIZE : (index + 1) * BATCH_SIZE]))
        for index in range(count)
    ]
    return alone, batches


def _families(keys: tuple[str, ...], async_support: bool) -> list[Combination]:
    return [Combination(subset, async_support, False) for subset in all_subsets(keys)]


def projection_problems(family: Tree, union: Tree, anchors: Sequence[Tree]) -> list[str]:
    """How *family* differs from the projection of *union* onto *anchors* (none: it is one).

    Only the files the decomposed checks read count (``in_scope``).  A file is in
    the projection when the union and some anchor have it, with the union's
    permission bits and the union's lines that some anchor's file holds.
    """
    problems: list[str] = []
    paths = {path for path in (*family, *union) if in_scope(path)}
    for path in sorted(paths):
        held = [anchor[path][0] for anchor in anchors if path in anchor]
        if path not in union:
            problems.append(f"{path}: not in the union's render")
            continue
        if not held:
            if path in family:
                problems.append(f"{path}: in no anchor's render")
            continue
        if path not in family:
            problems.append(f"{path}: missing, although an anchor has it")
            continue
        data, mode = family[path]
        if mode != union[path][1]:
            problems.append(f"{path}: mode {mode:o}, the union's is {union[path][1]:o}")
        if data != projected(union[path][0], tuple(held)):
            problems.append(f"{path}: not the union's lines that its anchors hold")
    return problems


def projected(union: bytes, anchors: tuple[bytes, ...]) -> bytes:
    """The lines of *union* that one of *anchors* holds, in *union*'s order."""
    if all(anchor == union for anchor in anchors):
        return union
    lines = union.splitlines(keepends=True)
    kept: set[int] = set()
    for anchor in set(anchors):
        kept |= _aligned(anchor, union)
    return b"".join(line for index, line in enumerate(lines) if index in kept)


@functools.lru_cache(maxsize=4096)
def _aligned(anchor: bytes, union: bytes) -> frozenset[int]:
    pairs = aligned_lines(anchor.splitlines(keepends=True), union.splitlines(keepends=True))
    return frozenset(index for _, index in pairs)


def aligned_lines(first: Sequence[bytes], second: Sequence[bytes]) -> list[tuple[int, int]]:
    """Pairs of equal lines of *first* and *second*, in order (a patience diff)."""
    pairs: list[tuple[int, int]] = []
    _align(first, second, _Span(0, len(first), 0, len(second)), pairs)
    return sorted(pairs)


@dataclass
class _Span:
    """The part of both sequences still to align: ``first[a:a_end]``, ``second[b:b_end]``."""

    a: int
    a_end: int
    b: int
    b_end: int


def _align(
    first: Sequence[bytes], second: Sequence[bytes], span: _Span, pairs: list[tuple[int, int]]
) -> None:
    # Equal lines at the start, blank lines excepted (they belong to what follows them).
    while (
        span.a < span.a_end
        and span.b < span.b_end
        and first[span.a] == second[span.b]
        and first[span.a].strip()
    ):
        pairs.append((span.a, span.b))
        span.a += 1
        span.b += 1
    while (
        span.a < span.a_end
        and span.b < span.b_end
        and (first[span.a_end - 1] == second[span.b_end - 1])
    ):
        span.a_end -= 1
        span.b_end -= 1
        pairs.append((span.a_end, span.b_end))
    if span.a == span.a_end or span.b == span.b_end:
        return
    ones_first = Counter(first[span.a : span.a_end])
    ones_second = Counter(second[span.b : span.b_end])
    where = {
        second[index]: index
        for index in range(span.b, span.b_end)
        if ones_second[second[index]] == 1
    }
    candidates = [
        (index, where[first[index]])
        for index in range(span.a, span.a_end)
        if ones_first[first[index]] == 1 and first[index] in where
    ]
    chain = _longest_increasing(candidates)
    a, b = span.a, span.b
    for index, other in chain:
        _align(first, second, _Span(a, index, b, other), pairs)
        pairs.append((index, other))
        a, b = index + 1, other + 1
    if chain:
        _align(first, second, _Span(a, span.a_end, b, span.b_end), pairs)


def _longest_increasing(candidates: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The longest run of *candidates* (increasing in their first) increasing in their second."""
    tails: list[int] = []
    ends: list[int] = []
    before: list[int | None] = [None] * len(candidates)
    for position, (_, other) in enumerate(candidates):
        slot = bisect.bisect_left(tails, other)
        if slot == len(tails):
            tails.append(other)
            ends.append(position)
        else:
            tails[slot] = other
            ends[slot] = position
        before[position] = ends[slot - 1] if slot else None
    chain: list[tuple[int, int]] = []
    link: int | None = ends[-1] if ends else None
    while link is not None:
        chain.append(candidates[link])
        link = before[link]
    return chain[::-1]


class FamilyChecks:
    """This worker's view of the decomposition: which combinations it covers, and
    the anchors' renders, held in a project folder of their own for their checks."""

    def __init__(
        self,
        keys: tuple[str, ...],
        seed: int,
        render_files: Callable[[Combination], Tree],
        anchor_folder: ProjectFolder,
    ) -> None:
        self.keys = keys
        self.seed = seed
        self.sampled = sampled_families(keys, seed) if len(keys) > 1 else frozenset()
        self._render_files = render_files
        self._folder = anchor_folder
        self._trees: dict[Combination, Tree] = {}
        self._problems: dict[Combination, list[str]] = {}
        self._files: dict[Combination, Files] = {}
        self.decomposed = Counter[str]()
        """Checks taken from the anchors, by kind, for the run's summary."""

    def problems(self, combo: Combination, tree: Tree) -> list[str]:
        """``projection_problems`` of *combo* (whose render is *tree*) and its anchors."""
        if combo not in self._problems:
            anchors = [self._tree(anchor) for anchor in anchors_of(combo, self.keys)]
            self._problems[combo] = projection_problems(tree, anchors[-1], anchors[:-1])
        return self._problems[combo]

    def decomposes(self, combo: Combination, tree: Tree) -> bool:
        """Whether *combo*'s package checks are its anchors': a projection, not sampled."""
        return (
            not is_anchor(combo, self.keys)
            and combo.family not in self.sampled
            and not self.problems(combo, tree)
        )

    def anchors(self, combo: Combination) -> tuple[Combination, ...]:
        return anchors_of(combo, self.keys)

    def hold(self, anchor: Combination) -> Path:
        """The anchor's render, in this worker's anchor folder."""
        return self._folder.hold(self._tree(anchor))

    def files(self, anchor: Combination) -> Files:
        """The anchor's render, in memory."""
        if anchor not in self._files:
            self._files[anchor] = Files.of(self._tree(anchor))
        return self._files[anchor]

    def _tree(self, anchor: Combination) -> Tree:
        if anchor not in self._trees:
            self._trees[anchor] = self._render_files(anchor)
        return self._trees[anchor]

    @contextlib.contextmanager
    def whole(self, combo: Combination, tree: Tree) -> Iterator[None]:
        """Run *combo*'s check whole; if it was sampled, its failure refutes the premise."""
        try:
            yield
        except pytest.fail.Exception as failure:
            if combo.family in self.sampled and not self.problems(combo, tree):
                pytest.fail(
                    f"{failure}\n\nThis family is a projection of its anchors, sampled "
                    f"(MATRIX_RENDER_SEED={self.seed}) to be checked whole: its failure "
                    "refutes the premise of tests/families.py, which would have "
                    "passed it if its anchors pass.",
                    pytrace=False,
                )
            raise
