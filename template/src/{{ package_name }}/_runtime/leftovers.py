"""What an unfinished ``copier update`` left in a project: conflicts, rejected hunks.

``copier update`` exits 0 even when it could not merge the template's changes with
yours.  With ``--conflict inline`` (the default) it writes both versions into the
file between conflict markers; with ``--conflict rej`` it keeps the template's lines
and puts your hunk in a ``*.rej`` file beside it.

This module imports nothing of the package, whose modules may be the ones that hold
the conflicts: the project's ``tests/test_update_leftovers.py`` loads it by its path,
and so does the template, to list the same files when an update ends.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterator

__all__ = ["REJECTED_SUFFIXES", "SKIPPED_DIRS", "leftovers", "update_leftovers"]

# Built here, so that this file does not itself hold the markers it looks for.
_START = b"<" * 7
_END = b">" * 7
REJECTED_SUFFIXES = (".rej", ".orig")
"""What ``--conflict rej`` (and ``patch``) leave beside a file it could not merge."""
SKIPPED_DIRS = frozenset(
    {".git", ".venv", "venv", ".tox", ".nox", "node_modules", "__pycache__", "site"}
    | {".mypy_cache", ".ruff_cache", ".pytest_cache", ".hypothesis", "build", "dist"}
)
"""Folders that no update writes: version control, caches, builds.  A folder that
holds a ``pyvenv.cfg`` (a virtual environment of any name) is skipped too."""


def _project_files(root: Path) -> Iterator[Path]:
    """Every file under *root* but those of ``SKIPPED_DIRS``, in sorted order."""
    for folder, dirs, files in os.walk(root):
        here = Path(folder)
        dirs[:] = sorted(
            name
            for name in dirs
            if name not in SKIPPED_DIRS and not (here / name / "pyvenv.cfg").exists()
        )
        for name in sorted(files):
            yield here / name


def _conflict_lines(path: Path) -> list[int]:
    """Line numbers of the conflicts that start in *path*.

    A conflict starts at a line that is ``<<<<<<<`` followed by a space or nothing,
    in a file that also has a ``>>>>>>>`` line.  A lone ``=======`` line is no
    conflict: Markdown and reStructuredText underline headings with it.  A binary
    file (a NUL byte in its first 8 KiB) has none.
    """
    try:
        data = path.read_bytes()
    except OSError:
        return []
    if b"\0" in data[:8192]:
        return []
    starts = []
    ended = False
    for number, line in enumerate(data.splitlines(), 1):
        marker = line.split(b" ", 1)[0]
        if marker == _START:
            starts.append(number)
        ended = ended or marker == _END
    return starts if ended else []


def leftovers(root: Path) -> dict[str, list[int]]:
    """Each file under *root* that an update left unresolved, by its relative path.

    The value lists the lines where the file's conflicts start; it is empty for a
    rejected hunk (a ``*.rej`` or ``*.orig`` file).
    """
    found = {}
    for path in _project_files(root):
        rejected = path.name.endswith(REJECTED_SUFFIXES)
        lines = _conflict_lines(path)
        if rejected or lines:
            found[path.relative_to(root).as_posix()] = lines
    return found


def update_leftovers(root: Path) -> list[str]:
    """Where an update left conflicts (``file:line``) or rejected hunks (``*.rej``)."""
    found: list[str] = []
    for name, lines in leftovers(root).items():
        found += [f"{name}:{number}" for number in lines] or [name]
    return found
