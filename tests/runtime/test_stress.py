"""The stress tier's machinery keeps its own promises, where a broken one would
blame a class: a short storm, random sequences and crashes on a trivial class."""

from __future__ import annotations

import os
import re
import signal
import time
import warnings
from typing import TYPE_CHECKING

import pytest
from _runtime.helpers import AcquireRelease, Acquisition
from _runtime.stress import (
    STORMS,
    Case,
    Figures,
    Killer,
    Subject,
    _Interrupter,
    _run_interrupts,
    _sort_warnings,
    _spin,
    _Tally,
    committed_uses,
    note_progress,
    play,
    running,
    surviving_version,
)

if TYPE_CHECKING:
    from contextlib import ExitStack
    from pathlib import Path

raw_file = AcquireRelease(os.open, os.close)


def test_a_storm_ended_by_another_exception_sends_no_signal_after_it() -> None:
    # A test's timeout ends a storm wherever it is, perhaps with a signal armed:
    # landing later, that signal would fail whatever runs next.
    storm = STORMS["SIGALRM"]
    handler = signal.getsignal(storm.signum)
    with pytest.raises(TimeoutError), _Interrupter(storm) as interrupter:
        interrupter.arm(0.05)
        raise TimeoutError
    time.sleep(0.1)
    assert signal.getsignal(storm.signum) is handler
    assert (interrupter.sent, interrupter.delivered) == (1, 0)


@pytest.mark.parametrize("storm", ["SIGINT", "SIGALRM"])
def test_a_short_storm_on_a_class_that_keeps_the_contract(
    tmp_path: Path, storm: str
) -> None:
    path = tmp_path / "data"
    path.write_bytes(b"")
    # A body of a few milliseconds: wider than a loaded machine's scheduling
    # jitter, which a block of microseconds would leave few signals to land in.
    subject = Subject(
        make=lambda: raw_file(path, os.O_RDONLY), body=lambda _: _spin(0.003)
    )
    figures = Figures()
    handler = signal.getsignal(STORMS[storm].signum)
    _run_interrupts("raw-file", subject, figures, STORMS[storm], count=20)
    assert signal.getsignal(STORMS[storm].signum) is handler
    [line] = figures.lines
    assert line.startswith("raw-file: ")
    assert "hung: 0" in line
    assert "FAILED" not in line


def test_random_sequences_on_a_class_that_keeps_the_contract(tmp_path: Path) -> None:
    path = tmp_path / "data"
    path.write_bytes(b"")

    def build(tmp_path: Path, stack: ExitStack) -> Case:
        return Case(make=lambda: raw_file(path, os.O_RDONLY), use=lambda a: a.value)

    figures = Figures()
    cases = {"raw-file": (Acquisition, build)}
    for case in running("raw-file", tmp_path, figures, cases, play):
        case.play_random()
    [line] = figures.lines
    assert line.startswith("raw-file: 100 random sequences held")


def test_a_package_object_released_by_its_finalizer_fails_the_run() -> None:
    # The runtime's suite imports it as ``_runtime``: its classes are the package's.
    tally = _Tally()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        warnings.warn("unclosed", ResourceWarning, source=raw_file, stacklevel=1)
        warnings.warn("unclosed", ResourceWarning, source=object(), stacklevel=1)
    _sort_warnings(caught, tally)
    assert tally.problems == ["released by its finalizer: unclosed"]
    assert tally.stdlib_warnings == {"object": 1}


def _write_versions(target: Path, start: int, progress: int) -> None:
    version = start
    while True:
        version += 1
        note_progress(progress, b"s", version)
        target.write_bytes(b"%d" % version)
        note_progress(progress, b"c", version)


def test_a_killed_writer_reports_what_it_started_and_committed(
    tmp_path: Path,
) -> None:
    target = tmp_path / "target"
    with Killer(_write_versions) as killer:
        for start in range(0, 50, 10):
            started, committed = killer.kill(target, start, 0.005)
            assert start <= committed <= started <= committed + 1


@pytest.mark.parametrize(
    ("log", "committed"),
    [
        ([], 0),
        (["use", "use", "exit"], 2),
        (["use", "use", "raise"], 0),
        (["use", "close", "use-outside"], 1),
        (["use", "exit", "use", "raise", "use-outside", "use-outside"], 3),
    ],
)
def test_a_transactions_log_commits_the_uses_of_blocks_that_exit(
    log: list[str], committed: int
) -> None:
    assert committed_uses(log) == committed


@pytest.mark.parametrize(
    ("batches", "started", "committed", "found"),
    [
        ([], 0, 0, 0),
        ([], 1, 0, 0),
        ([(1, 3)], 1, 1, 1),
        ([(1, 3), (2, 3)], 3, 2, 2),
        ([(3, 3), (4, 3), (5, 3)], 5, 4, 5),  # killed between commit and note
        ([(3, 3), (4, 3), (5, 3)], 6, 5, 5),
    ],
)
def test_a_killed_writers_whole_batches_give_its_last_version(
    batches: list[tuple[int, int]], started: int, committed: int, found: int
) -> None:
    assert found == surviving_version(
        batches, rows=3, started=started, committed=committed, where="kill 0"
    )


@pytest.mark.parametrize(
    ("batches", "started", "committed", "says"),
    [
        ([(2, 3), (3, 3)], 3, 3, "kill 0: versions [2, 3]"),
        ([(1, 3), (3, 3)], 3, 3, "kill 0: versions [1, 3]"),
        ([(1, 3), (2, 3), (3, 3), (4, 3)], 4, 4, "versions [1, 2, 3, 4]"),
        ([(1, 3), (2, 2)], 2, 2, "transactions cut short: [(2, 2)]"),
        ([(1, 4)], 1, 1, "transactions cut short: [(1, 4)]"),
        ([(1, 3), (2, 3)], 4, 3, "holds version 2; the writer had committed 3"),
        ([(1, 3), (2, 3), (3, 3)], 2, 1, "holds version 3; the writer had"),
        ([], 2, 1, "holds version 0; the writer had committed 1 and started 2"),
    ],
)
def test_a_killed_writers_torn_or_lost_batches_are_named(
    batches: list[tuple[int, int]], started: int, committed: int, says: str
) -> None:
    with pytest.raises(AssertionError, match=re.escape(says)):
        surviving_version(
            batches, rows=3, started=started, committed=committed, where="kill 0"
        )


STRESS_CONFTEST = """
from _runtime.async_stress import async_case
from _runtime.stress import figures, pytest_generate_tests, sync_case
"""

STRESS_MODULE = """
import os
from _runtime.async_stress import AsyncStressTests
from _runtime.helpers import AcquireRelease, Acquisition
from _runtime.stress import Case, Subject

raw_file = AcquireRelease(os.open, os.close)


def subject(tmp_path, stack):
    return Subject(make=lambda: raw_file(os.devnull, os.O_RDONLY))


def case(tmp_path, stack):
    return Case(make=lambda: raw_file(os.devnull, os.O_RDONLY))


class TestStress(AsyncStressTests):
    subjects = {"one": subject, "two": subject}
    cases = {"raw": (Acquisition, case)}
    async_cases = {"first": (Acquisition, case)}
"""


def test_the_tiers_hook_parametrizes_every_test_by_the_classes_it_names(
    pytester: pytest.Pytester,
) -> None:
    # What a project's tests/stress/conftest.py imports, on a class of two subjects
    # and one sync and one async case: each test once per name, nothing else.
    pytester.makeconftest(STRESS_CONFTEST)
    pytester.makepyfile(test_tier=STRESS_MODULE)
    items, _ = pytester.inline_genitems("-p", "no:cacheprovider")
    collected = sorted(item.nodeid.partition("::TestStress::")[2] for item in items)
    assert collected == [
        "test_raising_signal_handlers_leave_nothing_held[one-SIGALRM]",
        "test_raising_signal_handlers_leave_nothing_held[one-SIGTERM]",
        "test_raising_signal_handlers_leave_nothing_held[two-SIGALRM]",
        "test_raising_signal_handlers_leave_nothing_held[two-SIGTERM]",
        "test_random_async_sequences_keep_the_contract[first]",
        "test_random_sequences_keep_the_contract[raw]",
        "test_real_sigints_leave_nothing_held[one]",
        "test_real_sigints_leave_nothing_held[two]",
    ]
