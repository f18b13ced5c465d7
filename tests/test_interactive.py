"""Copier's own interactive questionnaire, driven through a pseudo-terminal.

A user who runs ``copier copy`` in a terminal answers ``project_name`` first; Copier
then derives ``package_name``'s default from it, validates that default and shows
it in the next prompt.  A default it refused ended the copy with a traceback, before
the user could type a package name.  These tests type hostile and ordinary project
names into the real prompt (prompt_toolkit, through questionary) and check that
each reaches the package name's prompt, showing the default ``to_package_name``
derives, with no traceback.  The copy is stopped there: nothing is rendered.
"""

from __future__ import annotations

import contextlib
import os
import pty
import re
import select
import signal
import subprocess
import sys
import time
from typing import TYPE_CHECKING

import pytest
import yaml

from tests.conftest import tool_env
from tests.matrix import ROOT
from tests.matrix import template as extension

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

PROJECT_NAMES = [
    "My Resources",
    "Ada Lovelace's Resources",
    "Resource",
    "Json",
    "Test",
    "Tests",
    "Site",
    "Stress",
    "Sqlite3",
    "class",
    "Match",
    "123",
    "2048 Game",
    "The Quick Brown Fox Jumps Over The Lazy Dog",
    "Supercalifragilisticexpialidocious",
    "日本語のリソース",
    "Ресурсы",
    "مكتبة",
    "🚀🚀",
    "🦀 Crab Resources 🦀",
    'The "Quoted" Toolkit',
    "It's O'Brien's",
    "Back\\slash {{ jinja }} {% raw %}",
    "Café Déjà-Vu",
    "\uff26\uff55\uff4c\uff4c\uff57\uff49\uff44\uff54\uff48",  # "Fullwidth" in fullwidth letters
    "_private_",
    "x" * 200,
]
"""Long names, standard-library and reserved names, keywords, digits first, scripts
other than Latin, emoji only, quotes and apostrophes, Jinja syntax, fullwidth letters."""

ANSI = re.compile(
    rb"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[()][0-9A-Za-z]|[=>])"
)
"""Terminal control sequences: CSI, OSC, character-set selection, keypad modes."""
CURSOR_POSITION_REQUEST = b"\x1b[6n"
CLEAR_LINE = b"\x15"  # Ctrl-U: delete the prefilled default before typing
TIMEOUT = 60.0


def _help(question: str) -> str:
    """The first words of *question*'s help text, which its prompt shows."""
    questions = yaml.safe_load((ROOT / "copier.yml").read_text(encoding="utf-8"))
    return " ".join(str(questions[question]["help"]).split()[:5])


class Terminal:
    """A process on the slave side of a pseudo-terminal, and what it wrote there."""

    def __init__(self, master: int, process: subprocess.Popen[bytes]) -> None:
        self.master = master
        self.process = process
        self.output = b""

    def screen_text(self) -> str:
        """What was written, without control sequences and carriage returns."""
        plain = ANSI.sub(b"", self.output).replace(b"\r", b"")
        return plain.decode("utf-8", "replace")

    def shows(self, wanted: str, after: str = "") -> bool:
        """Is *wanted* on the screen (after the first *after*, if given)?"""
        screen = self.screen_text()
        start = screen.find(after)
        return start >= 0 and wanted in screen[start + len(after) :]

    def read_until(self, wanted: str, deadline: float, after: str = "") -> bool:
        """Read until *wanted* is shown (True), or the process ends (False).

        With *after*, *wanted* counts only once it is shown after *after*.
        """
        while time.monotonic() < deadline:
            if self.shows(wanted, after):
                return True
            ready, _, _ = select.select([self.master], [], [], 0.2)
            if not ready:
                if self.process.poll() is not None:
                    return self.shows(wanted, after)
                continue
            try:
                chunk = os.read(self.master, 65536)
            except OSError:  # EIO: the process closed the terminal
                return self.shows(wanted, after)
            if not chunk:
                return self.shows(wanted, after)
            self.output += chunk
            if CURSOR_POSITION_REQUEST in chunk:
                # prompt_toolkit asks where the cursor is; a terminal answers.
                os.write(self.master, b"\x1b[1;1R")
        raise AssertionError(f"{wanted!r} not shown in {TIMEOUT} s:\n{self.screen_text()}")

    def type(self, text: str) -> None:
        os.write(self.master, text.encode())


@contextlib.contextmanager
def copier_in_a_terminal(template: Path, destination: Path) -> Iterator[Terminal]:
    """``copier copy`` as a user runs it in a terminal; killed with its session at the end."""
    master, slave = pty.openpty()
    env = tool_env() | {"TERM": "xterm", "LANG": "C.UTF-8", "COLUMNS": "120", "LINES": "40"}
    env.pop("NO_COLOR", None)
    try:
        process = subprocess.Popen(
            [sys.executable, "-m", "copier", "copy", "--trust", str(template), str(destination)],
            stdin=slave,
            stdout=slave,
            stderr=slave,
            env=env,
            start_new_session=True,
        )
    finally:
        os.close(slave)
    try:
        yield Terminal(master, process)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        os.close(master)


@pytest.mark.slow
@pytest.mark.parametrize("project_name", PROJECT_NAMES, ids=lambda name: ascii(name)[:40])
def test_any_project_name_reaches_the_package_name_prompt(
    template_snapshot: Path, tmp_path: Path, project_name: str
) -> None:
    """The name is typed at the first prompt; the second shows its default, no traceback."""
    default = extension.to_package_name(project_name)
    deadline = time.monotonic() + TIMEOUT
    with copier_in_a_terminal(template_snapshot, tmp_path / "project") as terminal:
        assert terminal.read_until(_help("project_name"), deadline), terminal.screen_text()
        terminal.type(CLEAR_LINE.decode() + project_name + "\r")
        question = _help("package_name")
        assert terminal.read_until(question, deadline), terminal.screen_text()
        # The prompt prefills the default, after the question's help text.
        assert terminal.read_until(default, deadline, after=question), terminal.screen_text()
        screen = terminal.screen_text()
        assert terminal.process.poll() is None, screen
    assert "Traceback" not in screen
    assert "Validation error" not in screen
    assert extension.package_name_problem(default) == ""
