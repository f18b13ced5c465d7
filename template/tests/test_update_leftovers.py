"""No file of the project holds what an unfinished ``copier update`` left behind.

``copier update`` exits 0 even when it could not merge the template's changes with
yours.  With ``--conflict inline`` (the default) it writes both versions into the
file between conflict markers; with ``--conflict rej`` it keeps the template's lines
and puts your hunk in a ``*.rej`` file beside it.  The test below names every such
file; while there is one, ``conftest.py`` runs this test alone, so the conflicts are
reported before a module that holds them breaks everything else.  Resolve each one
(keep your lines and the template's, delete the markers or the ``*.rej`` file), then
run the tests again.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterator

LEFTOVERS_TEST = Path(__file__).name
ROOT = Path(__file__).resolve().parent.parent
# Built here, so that this file does not itself hold the markers it looks for.
START = b"<" * 7
END = b">" * 7
REJECTED_SUFFIXES = (".rej", ".orig")
SKIPPED_DIRS = frozenset(
    {".git", ".venv", "venv", ".tox", ".nox", "node_modules", "__pycache__", "site"}
    | {".mypy_cache", ".ruff_cache", ".pytest_cache", ".hypothesis", "build", "dist"}
)


def _project_files(root: Path) -> Iterator[Path]:
    """Every file under *root*, without version control, caches and virtualenvs."""
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
    conflict: Markdown and reStructuredText underline headings with it.
    """
    try:
        data = path.read_bytes()
    except OSError:
        return []
    if b"\0" in data[:8192]:
        return []  # a binary file
    starts = []
    ended = False
    for number, line in enumerate(data.splitlines(), 1):
        marker = line.split(b" ", 1)[0]
        if marker == START:
            starts.append(number)
        ended = ended or marker == END
    return starts if ended else []


def update_leftovers(root: Path = ROOT) -> list[str]:
    """Where an update left conflicts (``file:line``) or rejected hunks (``*.rej``)."""
    found = []
    for path in _project_files(root):
        name = path.relative_to(root).as_posix()
        if path.name.endswith(REJECTED_SUFFIXES):
            found.append(name)
        found += [f"{name}:{number}" for number in _conflict_lines(path)]
    return found


def test_no_update_leftovers() -> None:
    found = update_leftovers()
    assert not found, (
        "copier update left conflicts to resolve: keep your lines and the "
        "template's, delete the markers, merge each *.rej file into the file it "
        "names and delete it:\n" + "\n".join(found)
    )
