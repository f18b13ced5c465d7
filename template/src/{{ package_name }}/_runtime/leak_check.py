"""``LeakCheck`` and ``hunt_leaks``: fail a block, or a scenario, that leaks.

Both compare ``ResourceSnapshot``s taken before and after (``snapshot``), give
what is winding down its time to go, and name every ``ResourceWarning`` the
garbage collector raised meanwhile; ``hunt_leaks`` also watches memory over
repeated runs, with ``tracemalloc``.
"""

from __future__ import annotations

import contextlib
import gc
import os
import sysconfig
import time
import tracemalloc
import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING

import psutil

from ._process import _THREAD_EXIT, _OrphanAdoption
from .snapshot import _TOOLKIT_FILES, ResourceSnapshot, _Leak, _leaks_between

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable
    from types import TracebackType


class LeakError(AssertionError):
    """Raised when checked code leaves resources behind; the message lists them."""


def _warning_leaks(caught: Iterable[warnings.WarningMessage]) -> list[_Leak]:
    return [
        _Leak("warning", _describe_warning(w))
        for w in caught
        if issubclass(w.category, ResourceWarning)
    ]


def _describe_warning(caught: warnings.WarningMessage) -> str:
    """Say where a ResourceWarning was emitted, and where its object was made.

    One emitted while the toolkit collected garbage has no line of the caller's
    to show; ``tracemalloc``, if it traced the object, knows where it was made
    (the most recent frame outside the standard library).
    """
    if caught.filename in _TOOLKIT_FILES:
        text = f"ResourceWarning at garbage collection: {caught.message}"
    else:
        text = f"ResourceWarning at {caught.filename}:{caught.lineno}: {caught.message}"
    made = (
        tracemalloc.get_object_traceback(caught.source)
        if caught.source is not None
        else None
    )
    if made:
        outside = [frame for frame in made if not _in_stdlib_file(frame.filename)]
        frame = (outside or list(made))[-1]
        text += f", made at {frame.filename}:{frame.lineno}"
    return text


def _in_stdlib_file(filename: str) -> bool:
    """Whether *filename* is a module of the standard library (not an installed one)."""
    paths = sysconfig.get_paths()
    installed = (paths["purelib"], paths["platlib"])
    return filename.startswith(paths["stdlib"]) and not filename.startswith(installed)


_LEAK_KINDS = ("fd", "thread", "process", "connection", "resource", "task", "warning")


class _Allowance:
    """The leaks a check lets pass: kinds, and predicates on a description."""

    __slots__ = ("_kinds", "_predicates")

    def __init__(self, ignore: Iterable[str | Callable[[str], bool]]) -> None:
        kinds: set[str] = set()
        predicates: list[Callable[[str], bool]] = []
        for item in ignore:
            if isinstance(item, str):
                if item not in _LEAK_KINDS:
                    known = ", ".join(map(repr, _LEAK_KINDS))
                    msg = f"ignore: unknown leak kind {item!r} (known: {known})"
                    raise ValueError(msg)
                kinds.add(item)
            else:
                predicates.append(item)
        self._kinds = frozenset(kinds)
        self._predicates = tuple(predicates)

    def __call__(self, leak: _Leak) -> bool:
        """Whether *leak* is allowed."""
        return leak.kind in self._kinds or any(
            allows(leak.text) for allows in self._predicates
        )


def _settled_leaks(
    before: ResourceSnapshot,
    settle: float,
    allowed: _Allowance | None = None,
    caught: Iterable[warnings.WarningMessage] = (),
) -> list[str]:
    """Return what leaked since *before*, giving each leak its time to go.

    Descriptors, threads, children, connections and tracked resources get up to
    *settle* seconds; an OS thread outside ``threading`` at least
    ``_THREAD_EXIT``; an asyncio task none (its loop cannot run while this
    waits), nor a ResourceWarning among *caught*.  The looks come 0.2 ms apart
    at first (a joined thread's OS thread ends within a millisecond or so),
    then further apart, up to every 20 ms.
    """
    allowed = allowed or _Allowance(())
    start, pause = time.monotonic(), 0.0002
    while True:
        leaks = [
            leak
            for leak in _leaks_between(before, ResourceSnapshot.take())
            if not allowed(leak)
        ]
        waited = time.monotonic() - start
        if not any(waited < _patience(leak, settle) for leak in leaks):
            break
        time.sleep(pause)
        pause = min(2 * pause, 0.02)
    leaks += [leak for leak in _warning_leaks(caught) if not allowed(leak)]
    return sorted(leak.text for leak in leaks)


def _patience(leak: _Leak, settle: float) -> float:
    """How many seconds *leak* is given to go away by itself."""
    if leak.kind in {"task", "warning"}:
        return 0.0
    return max(settle, _THREAD_EXIT) if leak.lingers else settle


def _warn_again(caught: list[warnings.WarningMessage], *, everything: bool) -> None:
    """Emit again the warnings a check recorded; ResourceWarnings only if *everything*.

    With *everything* (the block raised, and its error is the one worth
    reading), a warning that a filter turns into an error is dropped.
    """
    for w in caught:
        if not everything and issubclass(w.category, ResourceWarning):
            continue
        with contextlib.suppress(Warning) if everything else contextlib.nullcontext():
            warnings.warn_explicit(
                w.message, w.category, w.filename, w.lineno, source=w.source
            )
    caught.clear()


class LeakCheck:
    """Context manager that fails if its block leaves resources open.

    On exit it raises ``LeakError`` naming every file descriptor, thread (also
    one started outside ``threading``), child process (also an orphaned
    grandchild, on Linux), inet connection, unreleased tracked resource and
    unfinished task of the running event loop that the block left behind, and
    every object that the garbage collector closed (its ``ResourceWarning``).
    Threads and child processes get up to *settle* seconds to wind down.  An
    exception raised by the block itself propagates unchanged, and the leak
    check is skipped: the block's own error is the one worth reading.

    *ignore* lets leaks pass: each item is a kind of leak (``"fd"``,
    ``"thread"``, ``"process"``, ``"connection"``, ``"resource"``, ``"task"``,
    ``"warning"``), or a predicate called with a leak's description (the line
    the failure would show) that returns true to let it pass.  *warmup*, if
    given, is called on entry before the snapshot: what a first use acquires
    for the life of the process (a module that opens a file when imported, a
    loop made on first use) is then held before the block starts.

    While entered, it records the warnings emitted (on exit the other warnings
    are emitted again) and, on Linux, has the process adopt the orphans of its
    descendants: enter and exit it in one thread, nested checks in order.
    """

    __slots__ = ("_allowed", "_before", "_caught", "_settle", "_warmup", "_watch")

    def __init__(
        self,
        *,
        settle: float = 1.0,
        ignore: Iterable[str | Callable[[str], bool]] = (),
        warmup: Callable[[], object] | None = None,
    ) -> None:
        self._settle = settle
        self._allowed = _Allowance(ignore)
        self._warmup = warmup
        self._before: ResourceSnapshot | None = None
        self._caught: list[warnings.WarningMessage] = []
        self._watch: contextlib.ExitStack | None = None

    def __enter__(self) -> LeakCheck:
        if self._watch is not None:
            msg = "this LeakCheck is entered already"
            raise RuntimeError(msg)
        if self._warmup is not None:
            self._warmup()
        # Garbage made before the block is collected here, its warnings unrecorded.
        self._before = ResourceSnapshot.take()
        with contextlib.ExitStack() as watch:
            self._caught = watch.enter_context(warnings.catch_warnings(record=True))
            warnings.simplefilter("always", ResourceWarning)
            watch.enter_context(_OrphanAdoption())
            self._watch = watch.pop_all()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        watch, self._watch = self._watch, None
        if watch is None or self._before is None:
            return
        leaks: list[str] = []
        try:
            with watch:
                if exc_type is None:
                    leaks = _settled_leaks(
                        self._before, self._settle, self._allowed, self._caught
                    )
        finally:
            _warn_again(self._caught, everything=exc_type is not None)
        if leaks:
            raise LeakError("resources leaked:\n  " + "\n  ".join(leaks))

    def leaks(self) -> list[str]:
        """Describe what is held now that was not held on entry.

        Inside the block, the objects the garbage collector closed so far are
        named too.
        """
        if self._before is None:
            msg = "LeakCheck.leaks() needs the check to be entered first"
            raise RuntimeError(msg)
        found = _leaks_between(self._before, ResourceSnapshot.take())
        found += _warning_leaks(self._caught)
        return sorted(leak.text for leak in found if not self._allowed(leak))


@dataclass(frozen=True, slots=True)
class LeakReport:
    """What ``hunt_leaks`` measured on a scenario that leaked nothing."""

    warmups: int
    """Runs made before measuring."""
    memory_deltas: tuple[int, ...]
    """Bytes of traced memory each tracked run added (negative when it freed)."""


def _name(scenario: Callable[..., object]) -> str:
    func = getattr(scenario, "func", scenario)  # functools.partial
    name = getattr(func, "__qualname__", None)
    return name if isinstance(name, str) else repr(scenario)


def _call(scenario: Callable[[], object]) -> None:
    scenario()


def _scenario_filter() -> tracemalloc.Filter:
    """Keep only the traces allocated under a tracked call of the scenario."""
    line = max(line for *_, line in _call.__code__.co_lines() if line is not None)
    return tracemalloc.Filter(
        inclusive=True, filename_pattern=__file__, lineno=line, all_frames=True
    )


def _memory_growth(start: tracemalloc.Snapshot, limit: int, top: int = 3) -> list[str]:
    """Describe the allocations, live now, that grew most since *start*.

    Allocations made under a call of the scenario are shown; if the tracebacks
    are too short to reach that call, the largest of all are.
    """
    end = tracemalloc.take_snapshot()
    for filters in ([_scenario_filter()], _noise_filters()):
        stats = [
            stat
            for stat in end.filter_traces(filters).compare_to(
                start.filter_traces(filters), "traceback"
            )
            if stat.size_diff > 0
        ]
        if stats:
            break
    lines: list[str] = []
    for stat in stats[:top]:
        lines.append(
            f"+{stat.size_diff} B in {stat.count_diff:+d} block(s), allocated at:"
        )
        lines += stat.traceback.format(limit=limit, most_recent_first=True)
    return lines


def _noise_filters() -> list[tracemalloc.Filter]:
    """Exclude allocations made by the hunt's own bookkeeping."""
    return [
        tracemalloc.Filter(inclusive=False, filename_pattern=pattern)
        for pattern in (
            tracemalloc.__file__,
            warnings.__file__,
            *sorted(_TOOLKIT_FILES),
            "<string>",
            os.path.join(os.path.dirname(psutil.__file__), "*"),
        )
    ]


_WarningKey = tuple[str, type[Warning], str, int]


def _check_warnings(
    caught: list[warnings.WarningMessage],
    kept: dict[_WarningKey, warnings.WarningMessage],
    name: str,
) -> None:
    """Fail on a ResourceWarning among *caught*; keep one of each other warning.

    Garbage is collected first: an object the run dropped in a reference cycle
    warns now, not in a later run or after the last one.
    """
    gc.collect()
    leaks = [leak.text for leak in _warning_leaks(caught)]
    for w in caught:
        key = (str(w.message), w.category, w.filename, w.lineno)
        if not issubclass(w.category, ResourceWarning) and key not in kept:
            kept[key] = w
    caught.clear()
    if leaks:
        listed = "\n  ".join(leaks)
        msg = f"{name} let objects be garbage-collected unreleased:\n  {listed}"
        raise LeakError(msg)


def hunt_leaks(
    scenario: Callable[[], object],
    *,
    warmups: int = 3,
    runs: int = 5,
    memory_threshold: int = 1024,
    settle: float = 1.0,
    frames: int = 10,
) -> LeakReport:
    """Run *scenario* repeatedly and fail if any run leaks; return the measures.

    The method is the one of CPython's refleak hunter: *warmups* runs first, so
    that caches and lazy imports settle, then *runs* tracked runs, with
    ``gc.collect()`` after each.  It raises ``LeakError``:

    * as soon as a run leaves anything that ``LeakCheck`` sees (a descriptor,
      thread, child process or orphan, inet connection, tracked resource or
      task of the running loop) that was not there after the warm-ups (after
      waiting up to *settle* seconds for it to go away), naming it;
    * if any run, warm-ups included, lets an object be garbage-collected
      unreleased (a ``ResourceWarning``), naming where it was emitted;
    * if traced memory grows by more than *memory_threshold* bytes on EVERY
      tracked run (growth on only some runs is cache noise), naming the largest
      allocations still alive, with up to *frames* frames of traceback each.

    ``tracemalloc`` is started for the hunt (with *frames* frames) unless it is
    already tracing, and stopped afterwards.  An exception raised by *scenario*
    propagates unchanged.  The scenario runs in this process, so a leak of
    something it allocated once per process (a connection pool) is only found if
    the warm-ups do not absorb it: keep scenarios self-contained.
    """
    if warmups < 0 or runs < 1:
        msg = f"need warmups >= 0 and runs >= 1, got {warmups} and {runs}"
        raise ValueError(msg)
    name = _name(scenario)
    started = not tracemalloc.is_tracing()
    if started:
        tracemalloc.start(frames)
    kept: dict[_WarningKey, warnings.WarningMessage] = {}
    try:
        with _OrphanAdoption(), warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", ResourceWarning)
            baseline = ResourceSnapshot.take()
            for _ in range(warmups):
                _call(scenario)
                _check_warnings(caught, kept, name)
                baseline = ResourceSnapshot.take()
            # The look each run takes, once before memory is measured: what it
            # allocates on its first call only is not the scenario's growth.
            _settled_leaks(baseline, 0)
            start = tracemalloc.take_snapshot()
            deltas = [0] * runs
            before = tracemalloc.get_traced_memory()[0]
            for run in range(runs):
                _call(scenario)
                _check_warnings(caught, kept, name)
                leaks = _settled_leaks(baseline, settle)  # collects garbage first
                if leaks:
                    msg = (
                        f"{name} leaked on tracked run {run + 1} of {runs} "
                        f"(after {warmups} warm-up runs):\n  " + "\n  ".join(leaks)
                    )
                    raise LeakError(msg)
                after = tracemalloc.get_traced_memory()[0]
                deltas[run], before = after - before, after
            if all(delta > memory_threshold for delta in deltas):
                growth = _memory_growth(start, frames)
                msg = (
                    f"{name} grew memory on every tracked run, by {deltas} bytes "
                    f"(threshold {memory_threshold}); largest new allocations:\n"
                    + "\n".join(growth)
                )
                raise LeakError(msg)
    finally:
        if started:
            tracemalloc.stop()
        for w in kept.values():
            warnings.warn_explicit(
                w.message, w.category, w.filename, w.lineno, source=w.source
            )
    return LeakReport(warmups, tuple(deltas))
