"""The update-leftovers scanner: what it names, and what it leaves alone."""

from __future__ import annotations

from typing import TYPE_CHECKING

from _runtime.leftovers import leftovers, update_leftovers

if TYPE_CHECKING:
    from pathlib import Path

START, MIDDLE, END = "<" * 7, "=" * 7, ">" * 7
CONFLICT = f"a\n{START} yours\nb\n{MIDDLE}\nc\n{END} theirs\n"


def test_conflicts_are_named_by_the_line_each_starts_at(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "two.py").write_text(CONFLICT + CONFLICT, encoding="utf-8")
    (tmp_path / "bare.txt").write_text(f"{START}\nx\n{END}\n", encoding="utf-8")
    assert update_leftovers(tmp_path) == ["bare.txt:1", "src/two.py:2", "src/two.py:8"]
    assert leftovers(tmp_path) == {"bare.txt": [1], "src/two.py": [2, 8]}


def test_rejected_hunks_are_named_by_their_file(tmp_path: Path) -> None:
    (tmp_path / "README.md.rej").write_text("@@ -1 +1 @@\n", encoding="utf-8")
    (tmp_path / "setup.cfg.orig").write_text("[metadata]\n", encoding="utf-8")
    assert update_leftovers(tmp_path) == ["README.md.rej", "setup.cfg.orig"]


def test_what_only_looks_like_a_conflict_is_none(tmp_path: Path) -> None:
    # A heading underline, a quote with no start, a start with no end, a marker
    # inside a word, and markers in a binary file.
    (tmp_path / "heading.md").write_text(f"Title\n{MIDDLE}\n", encoding="utf-8")
    (tmp_path / "quote.md").write_text(f"{END} quoted\n", encoding="utf-8")
    (tmp_path / "open.txt").write_text(f"{START} alone\n", encoding="utf-8")
    (tmp_path / "word.txt").write_text(f"{START}x\n{END}\n", encoding="utf-8")
    (tmp_path / "logo.png").write_bytes(f"\x89PNG\0\n{CONFLICT}".encode())
    assert update_leftovers(tmp_path) == []


def test_environments_caches_and_version_control_are_skipped(tmp_path: Path) -> None:
    for folder in (".git", ".venv", "node_modules", "__pycache__", "env-of-any-name"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "x.py").write_text(CONFLICT, encoding="utf-8")
    (tmp_path / "env-of-any-name" / "pyvenv.cfg").write_text("home = /usr\n")
    (tmp_path / "kept").mkdir()
    (tmp_path / "kept" / "x.py.rej").write_text("@@\n", encoding="utf-8")
    assert update_leftovers(tmp_path) == ["kept/x.py.rej"]


def test_an_unreadable_file_is_no_leftover(tmp_path: Path) -> None:
    (tmp_path / "dangling").symlink_to(tmp_path / "missing")
    assert update_leftovers(tmp_path) == []
