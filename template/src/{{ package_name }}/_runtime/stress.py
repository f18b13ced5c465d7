"""The stress tier's machinery: crashes, real interrupts, random misuse, load.

Each module of a project's stress tier (``tests/stress/``, run by
``pytest -m stress``) names its classes and how to drive them (a ``Subject`` for
the real SIGINTs, a ``Case`` for the random sequences) and runs them through the
functions here; ``async_stress`` adds the asyncio classes' random sequences.
``STRESS_SEED=<seed>`` replays the random delays of a run.

Needs ``pytest`` and ``hypothesis`` (the project's dev group): nothing the
package imports for its users imports this module.
"""

from __future__ import annotations

import contextlib
import faulthandler
import functools
import gc
import inspect
import os
import queue
import random
import signal
import statistics
import subprocess
import sys
import threading
import time
import traceback
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, ClassVar, Protocol, TextIO

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from .errors import ClosedResourceError, ReentryError
from .leak_check import LeakCheck

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Mapping, Sequence
    from contextlib import AbstractContextManager, ExitStack
    from types import FrameType

SEED = int(os.environ.get("STRESS_SEED") or int.from_bytes(os.urandom(4), "big"))
"""The run's random seed, printed with the figures and in failure messages:
``STRESS_SEED=<seed>`` replays the random delays (hypothesis prints its own)."""


class _CaptureManager(Protocol):
    """pytest's capture manager (its ``"capturemanager"`` plugin), as used here."""

    def suspend_global_capture(self, *, in_: bool = False) -> None: ...

    def resume_global_capture(self) -> None: ...


class Figures:
    """Collects one line of figures per stress test, printed at the end of the run.

    *capture* is pytest's capture manager (``"capturemanager"``), which the
    interrupt runs step past to show the stacks of a hung attempt.
    """

    def __init__(self, capture: _CaptureManager | None = None) -> None:
        self.lines: list[str] = []
        self.capture = capture

    def pytest_terminal_summary(
        self, terminalreporter: pytest.TerminalReporter
    ) -> None:
        if self.lines:
            terminalreporter.section("stress figures")
            terminalreporter.write_line(f"seed {SEED}")
            for line in self.lines:
                terminalreporter.write_line(line)


def seeded_rng(name: str) -> random.Random:
    return random.Random(f"{SEED}-{name}")  # noqa: S311 - not for secrets


# Crashes: a writer killed with SIGKILL at a random moment, 200 times.
#
# A helper process, started once, forks one writer per kill: the writer loops
# over atomic writes, noting on a pipe the version it starts ("s") and the one it
# has committed ("c"); the test kills it after a random delay and checks what it
# left.  SIGKILL ends the process, not the machine: the kernel keeps what was
# written, so this proves atomicity against a crash of the process, not
# durability against a power cut.

KILLS = 200
MAX_DELAY = 0.02
"""Seconds: a kill lands at a random moment within the first 20 ms of the writer."""


def note_progress(progress: int, mark: bytes, version: int) -> None:
    os.write(progress, b"%s%d\n" % (mark, version))


def crash_helper(writer: Callable[[Path, int, int], None]) -> None:
    """Fork a *writer* for each request read from stdin; report how it ended.

    Runs in a process of its own, with one thread: ``fork`` is safe there.
    Request: ``target start``.  Replies: the writer's pid, then, once the
    test has killed it, its wait status and everything it noted.
    """
    for line in sys.stdin:
        target, start = line.split()
        read_end, write_end = os.pipe()
        pid = os.fork()
        if pid == 0:  # the writer
            os.close(read_end)
            try:
                writer(Path(target), int(start), write_end)
            except BaseException:  # noqa: BLE001 - reported to the test
                os.write(write_end, b"!" + traceback.format_exc().encode())
            os._exit(1)
        os.close(write_end)
        print(pid, flush=True)
        with open(read_end, "rb") as notes:
            noted = notes.read()
        _, status = os.waitpid(pid, 0)
        print(status, noted.decode().replace("\n", " "), flush=True)


class Killer:
    """Drives a ``crash_helper`` process for *writer*: one writer per ``kill``.

    *writer* is a module-level function of a test module, which the helper
    imports: ``writer(target, start, progress)`` writes version after version of
    *target*, from *start* on, noting each on *progress* (``note_progress``).
    """

    def __init__(self, writer: Callable[[Path, int, int], None]) -> None:
        code = (
            f"from {__name__} import crash_helper; "
            f"from {writer.__module__} import {writer.__name__} as writer; "
            "crash_helper(writer)"
        )
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
        self.helper = subprocess.Popen(  # noqa: S603 - our own interpreter
            [sys.executable, "-c", code],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        if self.helper.stdin is None or self.helper.stdout is None:  # never: pipes
            raise RuntimeError("the crash helper has no pipes")
        self._requests: IO[str] = self.helper.stdin
        self._replies: IO[str] = self.helper.stdout

    def __enter__(self) -> Killer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def kill(self, target: Path, start: int, delay: float) -> tuple[int, int]:
        """Start a writer, SIGKILL it after *delay* s; return (started, committed)."""
        self._requests.write(f"{target} {start}\n")
        self._requests.flush()
        pid = int(self._replies.readline())
        time.sleep(delay)
        os.kill(pid, signal.SIGKILL)
        status, _, noted = self._replies.readline().partition(" ")
        if "!" in noted:
            raise AssertionError(f"the writer failed by itself:\n{noted}")
        if not os.WIFSIGNALED(int(status)):
            raise AssertionError(f"the writer ended with status {status}")
        started = committed = start
        for note in noted.split():
            if note[0] == "s":
                started = int(note[1:])
            else:
                committed = int(note[1:])
        return started, committed

    def close(self) -> None:
        self._requests.close()  # the helper's loop ends
        try:
            self.helper.wait(10)
        finally:
            self.helper.kill()  # if it waits for a writer a failed test left
            self.helper.wait()
            self._replies.close()


# Interrupts: real signals at random moments in each class's block.
#
# A thread sends the main thread one signal per attempt, after a random delay
# drawn from the length of an uninterrupted block, so that the exception its
# Python handler raises lands while the object is being made, entered, used or
# left (or, for a jittery signal, just before or after: those attempts do not
# count).  The signals of a ``Storm``: SIGINT (KeyboardInterrupt), and two other
# signals whose handler raises, as servers and timers do: SIGTERM raising
# SystemExit, SIGALRM raising ``Alarm``.  Each attempt waits until its signal has
# been handled, checks that the very exception the handler raised came out of the
# block, then calls close(), which completes a release that the exception
# stopped, as documented, and checks that nothing is held: descriptors, threads,
# children and the class's own probe.  A LeakCheck spans the whole run, and a
# watchdog (``BLOCK_TIMEOUT``) each attempt.  Anything held, a hang, or the
# exception replaced by another fails the run.  One thing is counted and not
# failed: a signal whose exception Python itself drops, because it was raised in
# a finalizer.

BODY = 200e-6
"""Seconds of Python code that every block runs after its body, so that some
signals land in the body: its exit must then release in full."""
BLOCK_TIMEOUT = 30.0
"""Seconds an attempt (a block, its close() and the checks) may take: a hang
dumps every thread's stack on the terminal and ends the process (faulthandler,
which runs even if the hung code holds the GIL), rather than waiting for ever."""


class Alarm(BaseException):
    """Raised by the stress tier's SIGALRM handler.

    A ``BaseException`` that is not an ``Exception``, like ``KeyboardInterrupt``
    and ``SystemExit``: the runtime treats an ``Exception`` raised inside a
    release as the release failing (the object is closed, the error reported), and
    anything else as an interrupt, which leaves the release to close().  A timer
    that stops the code it interrupts is the second kind.
    """


@dataclass(frozen=True)
class Storm:
    """A signal whose Python handler raises *raises*, landed *count* times per class."""

    signum: signal.Signals
    raises: type[BaseException]
    count: int

    @property
    def label(self) -> str:
        return f"{self.signum.name} ({self.raises.__name__})"


STORMS = {
    "SIGINT": Storm(signal.SIGINT, KeyboardInterrupt, 300),
    "SIGALRM": Storm(signal.SIGALRM, Alarm, 100),
    "SIGTERM": Storm(signal.SIGTERM, SystemExit, 100),
}
"""The storms of each class, each landed in its block ``count`` times (in at most
``TRIES_PER_LANDING`` times as many tries)."""

TRIES_PER_LANDING = 50
"""Tries allowed per signal to land in the block.  Most land in a few; on a
loaded machine the sending thread's delay varies by more than a short block
lasts, and a storm there needs many more tries, not a different verdict."""


class _Interrupter:
    """Sends the main thread one real signal of *storm*, after a delay, per ``arm``."""

    def __init__(self, storm: Storm) -> None:
        self.storm = storm
        self.sent = 0
        self.delivered = 0
        self.raised: BaseException | None = None
        """The exception the handler raised last (cleared by the attempt)."""
        self.rewrapped = 0
        """Exceptions that came out as CPython 3.11's codec copy (``_rewrapped``)."""
        self._delays: queue.SimpleQueue[float | None] = queue.SimpleQueue()
        self._main = threading.get_ident()
        if self._main != threading.main_thread().ident:
            raise AssertionError("signals go to the main thread: start it there")
        name = f"stress-{storm.signum.name.lower()}"
        self._thread = threading.Thread(target=self._run, name=name)
        self._handler: Any = None
        self._interval = sys.getswitchinterval()
        self.swallowed = 0
        self._hook = sys.unraisablehook
        self._ended = False

    def __enter__(self) -> _Interrupter:
        self._handler = signal.signal(self.storm.signum, self._deliver)
        self._hook, sys.unraisablehook = sys.unraisablehook, self._unraisable
        # Hand the GIL over often, so that the sending thread runs on time.
        sys.setswitchinterval(1e-5)
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        # An exception from outside the storm (a test's timeout) may end it with
        # a signal armed or on its way, which must not land in the next test:
        # from here on nothing is sent and a late signal raises nothing, and the
        # old handler comes back only once the sending thread has ended.
        self._ended = True
        self._delays.put(None)
        try:
            self._thread.join()
        finally:
            sys.setswitchinterval(self._interval)
            sys.unraisablehook = self._hook
            signal.signal(self.storm.signum, self._handler)

    def _deliver(self, signum: int, frame: FrameType | None) -> None:
        self.delivered += 1
        if self._ended:
            return
        self.raised = self.storm.raises()
        raise self.raised

    def _unraisable(self, unraisable: sys.UnraisableHookArgs) -> None:
        """Count the storm's exceptions that Python drops; pass on the others.

        Python drops an exception raised in a finalizer or a weakref callback:
        the storm's exception landing in one (freeing an object can run either at
        any moment) is counted here; anything else goes to the usual hook.
        """
        if isinstance(unraisable.exc_value, self.storm.raises):
            self.swallowed += 1
        else:
            self._hook(unraisable)

    def _run(self) -> None:
        while (delay := self._delays.get()) is not None:
            time.sleep(delay)
            if not self._ended:
                signal.pthread_kill(self._main, self.storm.signum)

    def arm(self, delay: float) -> None:
        """Have one signal sent *delay* seconds from now."""
        if self.delivered != self.sent:
            raise AssertionError("armed again before the last signal was handled")
        self.sent += 1
        self._delays.put(delay)


def _until_delivered(interrupter: _Interrupter) -> None:
    """Wait in a function of its own (gh-108214) until the signal is handled."""
    while interrupter.delivered < interrupter.sent:
        time.sleep(0.0001)


def _spin(seconds: float) -> None:
    """Run Python code, where a signal is handled at once, for *seconds*."""
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def _latency(interrupter: _Interrupter) -> float:
    """The median time from ``arm(0)`` to the handler's exception, in busy code."""
    latencies = []
    for _ in range(30):
        start = time.perf_counter()
        try:
            interrupter.arm(0)  # the signal may come before arm() returns
            _spin(1.0)
            _until_delivered(interrupter)  # or after the spin, on a loaded machine
        except interrupter.storm.raises:
            latencies.append(time.perf_counter() - start)
        interrupter.raised = None
    return statistics.median(latencies)


def open_fds() -> dict[int, str]:
    """The open descriptors and what they are (on Linux; "?" elsewhere)."""
    directory = "/proc/self/fd" if os.path.isdir("/proc/self/fd") else "/dev/fd"
    found = {}
    for name in os.listdir(directory):
        try:
            os.fstat(int(name))
        except OSError:
            continue  # the listing's own, closed by now
        try:
            found[int(name)] = os.readlink(f"{directory}/{name}")
        except OSError:
            found[int(name)] = "?"
    return found


def serve_directory(directory: Path, stack: contextlib.ExitStack) -> str:
    """Serve *directory* over HTTP from a child process, until *stack* closes; its URL.

    A child: the server's sockets and threads are not the test's to count.
    """
    server = stack.enter_context(
        subprocess.Popen(
            [sys.executable, "-u", "-m", "http.server", "0", "--bind", "127.0.0.1"],
            cwd=directory,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
    )
    stack.callback(server.kill)
    if server.stdout is None:  # never: a pipe
        raise RuntimeError("the HTTP server has no pipe")
    with server.stdout:
        banner = server.stdout.readline()  # Serving HTTP on 127.0.0.1 port N (...)
    return f"http://127.0.0.1:{int(banner.split()[5])}"


def _nothing(value: object) -> None:
    pass


def nothing_held() -> str | None:
    return None


def no_tidying() -> None:
    pass


@dataclass
class Subject:
    """A class under test: how to make one object, use it, and see it released."""

    make: Callable[[], AbstractContextManager[Any]]
    body: Callable[[Any], object] = _nothing
    held: Callable[[], str | None] = nothing_held
    """What the class still holds by its own probe (None: nothing)."""
    tidy: Callable[[], None] = no_tidying
    """Called after each attempt, before the checks (accepts peers' connections)."""
    repair: Callable[[], None] = no_tidying
    """Called once the run has failed: lets what the failure left behind (a
    thread stuck for ever) end, so that the process can still exit."""


@dataclass
class _Tally:
    landed: dict[str, int] = field(
        default_factory=lambda: dict.fromkeys(
            ("before", "making", "entering", "body", "exiting", "after"), 0
        )
    )
    closed_later: int = 0
    rewrapped: int = 0
    """Exceptions copied, with the original as cause, by CPython 3.11's codecs."""
    dropped: int = 0
    """Exceptions of the handler that Python dropped: raised in a finalizer."""
    stdlib_warnings: dict[str, int] = field(default_factory=dict)
    by_collector: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    @property
    def inside(self) -> int:
        """How many signals landed in the block."""
        return sum(self.landed.values()) - self.landed["before"] - self.landed["after"]


def _interrupt_once(
    subject: Subject, interrupter: _Interrupter, delay: float, lead: float
) -> str:
    """Run one block with a signal due *delay* s after it starts; say where it landed.

    The signal is sent *lead* seconds early (the sending thread's latency), while
    this thread spins: a jittery one lands there ("before").
    """
    manager: Any = None
    phase = "before"
    try:
        interrupter.arm(delay)  # the signal may come before arm() returns
        _spin(lead)
        phase = "making"
        manager = subject.make()
        phase = "entering"
        with manager as value:
            phase = "body"
            subject.body(value)
            _spin(BODY)
            phase = "exiting"
        phase = "after"
        _until_delivered(interrupter)
    except BaseException as error:  # the handler's, or what replaced it
        if _rewrapped(error, interrupter.raised):
            interrupter.rewrapped += 1
        elif error is not interrupter.raised:
            if not _caused_by(error, interrupter.storm.raises):
                raise
            phase = f"converted:{type(error).__name__}: {error}"
    else:
        phase = "swallowed"
    _until_delivered(interrupter)
    # Not kept past the attempt: its traceback holds the frames of the block.
    interrupter.raised = None
    if manager is not None:
        # Only an interrupted release may leave the object held (the contract
        # core's state): __enter__ cleans up after itself, and __exit__ runs in
        # full after an interrupt raised in the body.
        if getattr(manager, "_state", None) in ("opening", "open"):
            phase += "+held" if phase == "exiting" else "+LEFT HELD"
        manager.close()  # completes a release that the interrupt stopped
    return phase


def _rewrapped(error: BaseException, raised: BaseException | None) -> bool:
    """Whether *error* is CPython 3.11's copy of *raised*, made by a codec.

    An exception raised inside a codec written in Python (``idna``, which
    ``socket.getaddrinfo`` runs on every host name) comes out of 3.11's codec
    machinery as a new exception of the same type, with a message that names
    the original, and the original as its cause, which a library may drop
    (httpcore's pool re-raises what ends a request ``from None``); 3.12 adds a
    note to the original instead.
    """
    return (
        raised is not None
        and type(error) is type(raised)
        and error.__cause__ in (raised, None)
        and str(error).endswith(f" codec failed ({type(raised).__name__}: {raised})")
    )


def _caused_by(error: BaseException, raises: type[BaseException]) -> bool:
    """Whether *error* was raised while handling (or from) a *raises*."""
    seen: set[int] = set()
    cause = error.__context__ or error.__cause__
    while cause is not None and id(cause) not in seen:
        if isinstance(cause, raises):
            return True
        seen.add(id(cause))
        cause = cause.__context__ or cause.__cause__
    return False


def run_interrupts(
    name: str,
    subject: Callable[[Path, ExitStack], Subject],
    tmp_path: Path,
    figures: Figures,
    storm: Storm = STORMS["SIGINT"],
) -> None:
    """Land ``storm.count`` signals in the block of *subject*, and check each one."""
    with contextlib.ExitStack() as stack:
        _run_interrupts(name, subject(tmp_path, stack), figures, storm)


def _run_interrupts(
    name: str, subject: Subject, figures: Figures, storm: Storm, count: int = 0
) -> None:
    """Land *count* (``storm.count``) signals in the block, check what each left."""
    count = count or storm.count
    suffix = "" if storm.signum == signal.SIGINT else f"-{storm.signum.name}"
    rng = seeded_rng(f"interrupt-{name}{suffix}")
    tally = _Tally()
    with (
        _terminal(figures.capture) as terminal,
        LeakCheck(),
        warnings.catch_warnings(record=True) as caught,
    ):
        warnings.simplefilter("always", ResourceWarning)
        with _Interrupter(storm) as interrupter:
            lead = _latency(interrupter)
            block = span = _time_block(subject)
            fds, threads = open_fds(), threading.active_count()
            swallowed = interrupter.swallowed
            raised = storm.raises.__name__
            began = time.perf_counter()
            for attempt in range(count * TRIES_PER_LANDING):
                if tally.inside >= count or tally.problems:
                    break
                delay = rng.uniform(0, span)
                phase = _attempt(subject, interrupter, delay, lead, terminal)
                landed, _, held = phase.partition("+")
                if held == "LEFT HELD" or landed.startswith("converted:"):
                    problem = (
                        f"the {raised} turned into {landed[10:]}"
                        if landed.startswith("converted:")
                        else f"a {raised} in {landed} left it held"
                    )
                    tally.problems.append(f"attempt {attempt}: {problem}")
                    break
                if landed == "swallowed" and interrupter.swallowed > swallowed:
                    swallowed = interrupter.swallowed
                    tally.dropped += 1
                    _check(subject, tally, fds, threads, f"attempt {attempt} ({phase})")
                    continue
                if landed == "swallowed":
                    tally.problems.append(f"attempt {attempt}: the {raised} vanished")
                    break
                tally.landed[landed] += 1
                # Aim at the block: follow its length, and the signal's latency.
                span = min(span * (0.95 if landed == "after" else 1.02), 3 * block)
                if block < 4 * lead:
                    lead *= {"before": 0.95, "after": 1.05}.get(landed, 1.0)
                tally.closed_later += bool(held)
                _check(subject, tally, fds, threads, f"attempt {attempt} ({phase})")
                gc.collect(0)  # this attempt's garbage, finalized out of any window
            # The watchdog's thread ends before the LeakCheck counts threads.
            faulthandler.cancel_dump_traceback_later()
            seconds = time.perf_counter() - began
            if tally.problems:
                subject.repair()
        _sort_warnings(caught, tally)
        tally.rewrapped = interrupter.rewrapped
        timing = f"{block * 1e6:.0f} us, {seconds:.1f} s"
        _report(name, tally, figures, storm, count=count, timing=timing)


@contextlib.contextmanager
def _terminal(capture: _CaptureManager | None) -> Iterator[TextIO]:
    """The process's own standard error, past pytest's capture; the watchdog's."""
    if capture is not None:
        capture.suspend_global_capture(in_=True)
    try:
        fd = os.dup(2)
    finally:
        if capture is not None:
            capture.resume_global_capture()
    with open(fd, "w") as terminal:
        try:
            yield terminal
        finally:
            faulthandler.cancel_dump_traceback_later()


def _attempt(
    subject: Subject,
    interrupter: _Interrupter,
    delay: float,
    lead: float,
    terminal: TextIO,
) -> str:
    """``_interrupt_once`` under the watchdog (re-armed by the next attempt)."""
    faulthandler.dump_traceback_later(BLOCK_TIMEOUT, exit=True, file=terminal)
    # No collection while the signal is pending: a finalizer it ran (of garbage
    # from an earlier attempt) would swallow the handler's exception, as Python
    # does with any finalizer's error.
    gc.disable()
    try:
        return _interrupt_once(subject, interrupter, delay, lead)
    finally:
        gc.enable()


def _time_block(subject: Subject) -> float:
    """Warm up, then time an uninterrupted block: the median, in seconds."""
    durations = []
    for _ in range(20):
        start = time.perf_counter()
        with subject.make() as value:
            subject.body(value)
            _spin(BODY)
        durations.append(time.perf_counter() - start)
        subject.tidy()
    return statistics.median(durations[5:])


def _check(
    subject: Subject, tally: _Tally, fds: dict[int, str], threads: int, where: str
) -> None:
    subject.tidy()
    if (held := _held(subject, fds, threads)) is not None:
        gc.collect()
        if _held(subject, fds, threads) is None:
            tally.by_collector.append(f"{where}: {held}")
        else:
            tally.problems.append(f"{where}: {held}")


def _held(subject: Subject, fds: dict[int, str], threads: int) -> str | None:
    now = open_fds()
    if now.keys() != fds.keys():
        gone = sorted(fds.keys() - now.keys())
        new = {fd: what for fd, what in now.items() if fd not in fds}
        return f"descriptors: new {new}, closed {gone}"
    if threading.active_count() != threads:
        alive = [thread.name for thread in threading.enumerate()]
        return f"{threading.active_count() - threads} thread(s) more: {alive}"
    return subject.held()


_RUNTIME = __name__.rpartition(".")[0]
_PACKAGE = _RUNTIME.rpartition(".")[0] or _RUNTIME
"""The package around the runtime (``<package>._runtime``), whose classes' warnings
are failures; the runtime itself where it is imported as a top-level package."""


def _of_the_package(module: str) -> bool:
    return module == _PACKAGE or module.startswith(f"{_PACKAGE}.")


def _sort_warnings(caught: list[warnings.WarningMessage], tally: _Tally) -> None:
    """A package object must never need its finalizer; count the stdlib's."""
    for warning in caught:
        source = type(getattr(warning, "source", None))
        if _of_the_package(source.__module__):
            tally.problems.append(f"released by its finalizer: {warning.message}")
        else:
            kind = source.__qualname__
            tally.stdlib_warnings[kind] = tally.stdlib_warnings.get(kind, 0) + 1


def _report(
    name: str, tally: _Tally, figures: Figures, storm: Storm, *, count: int, timing: str
) -> None:
    landed = ", ".join(f"{where} {n}" for where, n in tally.landed.items())
    line = (
        f"{name}: {tally.inside} {storm.label} in the block ({landed}); release "
        f"interrupted, completed by close(): {tally.closed_later}; hung: 0"
    )
    if tally.stdlib_warnings:
        line += f"; dropped, closed by a stdlib finalizer: {tally.stdlib_warnings}"
    if tally.dropped:
        raised = storm.raises.__name__
        line += f"; {raised} dropped by Python in a finalizer: {tally.dropped}"
    if tally.rewrapped:
        line += f"; copied by a codec (3.11, the original as cause): {tally.rewrapped}"
    if tally.by_collector:
        line += f"; released only by gc.collect(): {len(tally.by_collector)}"
    if tally.problems:
        line += f"; FAILED: {tally.problems[0]}"
    figures.lines.append(f"{line}; block {timing}")
    if tally.problems:
        raise AssertionError(f"{name} (seed {SEED}): {tally.problems}")
    if tally.by_collector:
        raise AssertionError(f"{name} (seed {SEED}): {tally.by_collector[:5]}")
    if tally.inside < count:
        landed = f"only {tally.inside} {storm.label} landed in time"
        raise AssertionError(f"{name}: {landed}")


# Properties: random sequences of the ways a user can drive (or misuse) an object.
#
# hypothesis draws a sequence of steps for one object: a `with` block (with, in
# its body, uses of the object, an early close, a nested re-entry, the class's own
# early release, and maybe an exception), a close() outside any block, a use
# outside any block.  A small model says what each step must do; the invariants:
# only the documented errors happen (ReentryError, ClosedResourceError, the
# body's own exception, unchanged), the class releases exactly once (its
# `_release` runs once if the object was ever entered, never otherwise, and the
# resource's own counters agree where it has them), and nothing is held at the
# end: descriptors, threads, children, and the class's own probe.

EXAMPLES = 100
"""Random sequences per class."""


Step = tuple[str, tuple[str, ...], bool]


STEPS = st.lists(
    st.one_of(
        st.tuples(
            st.just("with"),
            st.lists(
                st.sampled_from(("use", "close", "reenter", "early")), max_size=4
            ).map(tuple),
            st.booleans(),
        ),
        st.tuples(
            st.sampled_from(("close", "use", "early")),
            st.just(()),
            st.just(False),  # noqa: FBT003 - a step outside a block raises nothing
        ),
    ),
    min_size=1,
    max_size=6,
)


PROPERTY_SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,  # nothing written to .hypothesis/
    suppress_health_check=[HealthCheck.too_slow],
)


class _BodyError(Exception):
    """Raised by a block's body in the property tests."""


def _raises(expected: type[BaseException], call: Callable[[], object]) -> None:
    try:
        call()
    except expected:
        return
    pytest.fail(f"expected {expected.__name__}")


@dataclass
class Case:
    """One class for the property tests: how to drive it and what must follow."""

    make: Callable[[], Any]
    use: Callable[[Any], Any] | None = None
    """Uses the object; raises ClosedResourceError unless it is open (if guarded)."""
    guarded: bool = True
    early: Callable[[Any], Any] | None = None
    """The class's own early release (commit, release): refused unless open."""
    expect: Callable[[list[str]], str | None] = lambda log: None
    """Checks the outcome against the log of what happened while the object was
    open ("use", "early", "close", "exit", "raise"); returns a complaint."""
    releases: Callable[[Any], int] | None = None
    """The resource's own count of releases, where it keeps one."""
    held: Callable[[], str | None] = nothing_held
    tidy: Callable[[], None] = no_tidying
    examples: int = 0
    steps: dict[str, int] = field(default_factory=dict)


def committed_uses(log: list[str]) -> int:
    """How many uses a transaction's *log* (a ``Case``'s) leaves committed.

    A use in the block (``"use"``) is committed by the block's exit and undone
    by a raise or a ``close()``, which roll back; a use outside any block
    (``"use-outside"``) commits at once, as the connection autocommits it.
    """
    pending = committed = 0
    for event in log:
        pending += event == "use"
        committed += event == "use-outside"
        if event == "exit":
            committed += pending
        if event in ("exit", "raise", "close"):
            pending = 0
    return committed


def surviving_version(
    batches: Sequence[tuple[int, int]],
    *,
    rows: int,
    started: int,
    committed: int,
    where: str,
) -> int:
    """The last version a killed writer left, once its *batches* are checked.

    A crash test's writer inserts *rows* rows of version after version, each in
    one transaction that also deletes the versions older than the last three.
    *batches* are the ``(version, row count)`` pairs read after its kill, by
    version: each transaction is whole or absent, so they are the last three
    versions (fewer at the start), each with all its rows, and the last one is
    what the writer had committed, or had started if the kill came between its
    commit and its note of it (``Killer.kill``).  A broken promise raises
    ``AssertionError`` starting with *where*.
    """
    versions = [version for version, _ in batches]
    found = versions[-1] if versions else 0
    if versions != list(range(max(1, found - 2), found + 1)):
        raise AssertionError(f"{where}: versions {versions}")
    partial = [(version, count) for version, count in batches if count != rows]
    if partial:
        raise AssertionError(f"{where}: transactions cut short: {partial}")
    if found not in (committed, started):
        raise AssertionError(
            f"{where}: the database holds version {found}; the writer had "
            f"committed {committed} and started {started}"
        )
    return found


@contextlib.contextmanager
def _counting_releases(cls: type) -> Iterator[dict[int, int]]:
    """Count the calls of ``cls._release``, by object."""
    counts: dict[int, int] = {}
    original = cls.__dict__.get("_release")
    inherited = cls._release  # type: ignore[attr-defined]

    if inspect.iscoroutinefunction(inherited):

        async def counted_async(self: object, *, succeeded: bool) -> None:
            counts[id(self)] = counts.get(id(self), 0) + 1
            await inherited(self, succeeded=succeeded)

        cls._release = counted_async  # type: ignore[attr-defined]
    else:

        def counted(self: object, *, succeeded: bool) -> None:
            counts[id(self)] = counts.get(id(self), 0) + 1
            inherited(self, succeeded=succeeded)

        cls._release = counted  # type: ignore[attr-defined]
    try:
        yield counts
    finally:
        if original is None:
            del cls._release  # type: ignore[attr-defined]
        else:
            cls._release = original  # type: ignore[attr-defined]


class Player:
    """Drives one object through a sequence of steps, with the model of its state."""

    def __init__(self, case: Case) -> None:
        self.case = case
        self.obj = case.make()
        self.state = "new"
        self.log: list[str] = []

    def count(self, step: str) -> None:
        self.case.steps[step] = self.case.steps.get(step, 0) + 1

    def closed_early(self, event: str) -> None:
        if self.state == "open":
            self.log.append(event)
        self.state = "closed"

    def ended(self, *, raising: bool) -> None:
        if self.state == "open":
            self.log.append("raise" if raising else "exit")
        self.state = "closed"
        if not self.obj.closed:
            raise AssertionError("closed is false after the block")

    def play(self, steps: list[Step]) -> tuple[Any, bool, list[str]]:
        for kind, inner, raising in steps:
            self.count(kind)
            if kind == "close":
                self.obj.close()  # outside a block: never open here
            elif kind == "use":
                self.use()
            elif kind == "early":
                self.early()
            elif self.state != "new":
                with pytest.raises(ReentryError), self.obj:
                    pytest.fail("the body of a second with ran")
            elif raising:
                error = _BodyError()
                with pytest.raises(_BodyError) as raised:
                    self.block(inner, error)
                if raised.value is not error:
                    raise AssertionError("the body's exception was replaced")
            else:
                self.block(inner, None)
        self.obj.close()
        self.obj.close()
        return self.obj, self.state != "new", self.log

    def block(self, inner: tuple[str, ...], error: _BodyError | None) -> None:
        try:
            with self.obj:
                self.state = "open"
                for step in inner:
                    self.count(step)
                    if step == "use":
                        self.use()
                    elif step == "reenter":
                        with pytest.raises(ReentryError), self.obj:
                            pytest.fail("the body of a nested with ran")
                    elif step == "close":
                        self.obj.close()
                        self.closed_early("close")
                    else:
                        self.early()
                if error is not None:
                    raise error
        finally:
            self.ended(raising=error is not None)

    def use(self) -> None:
        use = self.case.use
        if use is None:
            return
        if self.state == "open" or not self.case.guarded:
            use(self.obj)
            self.log.append("use" if self.state == "open" else "use-outside")
        else:
            _raises(ClosedResourceError, functools.partial(use, self.obj))

    def early(self) -> None:
        early = self.case.early
        if early is None:
            return
        if self.state == "open":
            early(self.obj)
            self.closed_early("early")
        else:
            _raises(ClosedResourceError, functools.partial(early, self.obj))


def check_outcome(running: Running, outcome: tuple[object, bool, list[str]]) -> None:
    """Check what playing a sequence left: *outcome* is ``play``'s."""
    obj, entered, log = outcome
    case, counts, (fds, threads) = running.case, running.counts, running.baseline
    case.tidy()
    released = case.releases(obj) if case.releases else counts.get(id(obj), 0)
    if released != int(entered):
        raise AssertionError(f"released {released} times (entered: {entered})")
    if (complaint := case.expect(log)) is not None:
        raise AssertionError(complaint)
    if (now := open_fds()).keys() != fds.keys():
        raise AssertionError(f"descriptors: {now} (before: {fds})")
    if threading.active_count() != threads:
        raise AssertionError([thread.name for thread in threading.enumerate()])
    if (held := case.held()) is not None:
        raise AssertionError(held)


def play(case: Case, steps: list[Step]) -> tuple[Any, bool, list[str]]:
    """Play *steps* on a new object of a synchronous *case*."""
    return Player(case).play(steps)


@dataclass
class Running:
    """A case with what its test needs: release counts and the starting point."""

    case: Case
    counts: dict[int, int]
    baseline: tuple[dict[int, str], int]
    run: Callable[[Case, list[Step]], tuple[Any, bool, list[str]]]

    def play(self, steps: list[Step]) -> None:
        """Play *steps* on a new object, and check what followed."""
        self.case.examples += 1
        self.counts.clear()  # ids of objects already collected come back
        check_outcome(self, self.run(self.case, steps))

    def play_random(self) -> None:
        """Play ``EXAMPLES`` sequences of steps that hypothesis draws."""

        @PROPERTY_SETTINGS
        @given(steps=STEPS)
        def sequences(steps: list[Step]) -> None:
            self.play(steps)

        sequences()


def running(
    name: str,
    tmp_path: Path,
    figures: Figures,
    cases: Mapping[str, tuple[type, Callable[[Path, ExitStack], Case]]],
    run: Callable[[Case, list[Step]], tuple[Any, bool, list[str]]],
) -> Iterator[Running]:
    """Set up the case named *name* of *cases*, yield it running, report its figures."""
    cls, build = cases[name]
    with contextlib.ExitStack() as stack:
        case = build(tmp_path, stack)
        counts = stack.enter_context(_counting_releases(cls))
        run(case, [("with", ("use",), False)])  # warm up: caches, imports
        case.tidy()
        case.expect(["use", "exit"])
        case.steps.clear()
        yield Running(case, counts, (open_fds(), threading.active_count()), run)
    figures.lines.append(
        f"{name}: {case.examples} random sequences held (steps drawn: {case.steps})"
    )


class StressTests:
    """The stress tests of a module's classes: real SIGINTs, random sequences.

    A subclass (``TestStress`` in each module of the tier) names them:
    ``subjects`` maps a name to a function that builds the ``Subject`` of a class,
    ``cases`` a name to a class and a function that builds its ``Case``.  The
    tier's ``conftest.py`` takes ``pytest_generate_tests`` from here, which
    parametrizes each test with those names.
    """

    subjects: ClassVar[Mapping[str, Callable[[Path, ExitStack], Subject]]]
    cases: ClassVar[Mapping[str, tuple[type, Callable[[Path, ExitStack], Case]]]]

    def test_real_sigints_leave_nothing_held(
        self, subject: str, tmp_path: Path, figures: Figures
    ) -> None:
        run_interrupts(subject, self.subjects[subject], tmp_path, figures)

    @pytest.mark.parametrize("storm", ["SIGALRM", "SIGTERM"])
    def test_raising_signal_handlers_leave_nothing_held(
        self, subject: str, storm: str, tmp_path: Path, figures: Figures
    ) -> None:
        """The SIGINT run's checks, with other signals whose handler raises."""
        subject_of = self.subjects[subject]
        run_interrupts(subject, subject_of, tmp_path, figures, STORMS[storm])

    def test_random_sequences_keep_the_contract(self, sync_case: Running) -> None:
        sync_case.play_random()


# The tier's conftest.py imports the hook and the fixtures below.


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Run each test of a ``StressTests`` class once per class it names."""
    tests = metafunc.cls
    if tests is None or not issubclass(tests, StressTests):
        return
    if "subject" in metafunc.fixturenames:
        metafunc.parametrize("subject", list(tests.subjects))
    for fixture, listed in (("sync_case", "cases"), ("async_case", "async_cases")):
        if fixture in metafunc.fixturenames:
            names = list(getattr(tests, listed))
            metafunc.parametrize(fixture, names, indirect=True)


@pytest.fixture(scope="session")
def figures(pytestconfig: pytest.Config) -> Figures:
    """The run's figures, printed in a "stress figures" section at its end."""
    plugin = Figures(pytestconfig.pluginmanager.getplugin("capturemanager"))
    pytestconfig.pluginmanager.register(plugin, "stress-figures")
    return plugin


@pytest.fixture
def sync_case(
    request: pytest.FixtureRequest, tmp_path: Path, figures: Figures
) -> Iterator[Running]:
    """The class of the test class's ``cases`` that the parameter names."""
    yield from running(request.param, tmp_path, figures, request.cls.cases, play)


# Load: many threads or tasks at once, bounded in time: no deadlock, no leak.

THREADS = 8
DEADLINE = 60.0
"""Seconds a load test may take before it counts as a deadlock."""


def run_threads(target: Callable[[int], object], count: int) -> list[BaseException]:
    """Run *target(i)* in *count* threads at once; return what they raised."""
    errors: list[BaseException] = []
    start = threading.Barrier(count)

    def run(index: int) -> None:
        try:
            start.wait(DEADLINE)
            target(index)
        except BaseException as error:  # noqa: BLE001 - handed to the test
            errors.append(error)

    threads = [
        threading.Thread(target=run, args=(i,), name=f"load-{i}") for i in range(count)
    ]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + DEADLINE
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    stuck = [thread.name for thread in threads if thread.is_alive()]
    if stuck:
        raise AssertionError(
            f"deadlock: threads {stuck} still running after {DEADLINE} s"
        )
    return errors


# Windows: what the SIGINT runs found, each reproduced on purpose.
#
# Each test (in the section of its resource below) sends one SIGINT at the exact
# point where a real one hit and broke a promise (a profile hook sends it when a
# given C function returns, or before it is called, and Python handles it at
# its next check, as it would a SIGINT from outside), then checks the promise.
# The windows are closed; these tests, and the SIGINT runs, which allow none of
# them, keep them closed.


@contextlib.contextmanager
def interrupt_at(
    event: str, function: tuple[str, ...], *callers: str
) -> Iterator[list[bool]]:
    """Send this thread a SIGINT at the first *event* of a function of *function*.

    *event* is "c_return" or "c_call" of a C function, "call" of a Python one;
    the function is named one of *function*, called from functions named
    *callers* (the innermost first).  Python's own handler is in place (a job
    started in the background inherits SIGINT ignored).
    """
    fired: list[bool] = []

    def called_from(frame: FrameType | None) -> bool:
        for caller in callers:
            if frame is None or frame.f_code.co_name != caller:
                return False
            frame = frame.f_back
        return True

    def hook(frame: FrameType, what: str, arg: object) -> None:
        if what == "call":  # a Python function's own frame
            name, caller = frame.f_code.co_name, frame.f_back
        else:  # a C function, called from *frame*
            name, caller = getattr(arg, "__name__", ""), frame
        if what == event and name in function and called_from(caller):
            sys.setprofile(None)
            fired.append(True)
            signal.raise_signal(signal.SIGINT)  # handled right here, or held back

    handler = signal.signal(signal.SIGINT, signal.default_int_handler)
    sys.setprofile(hook)
    try:
        yield fired
    finally:
        sys.setprofile(None)
        signal.signal(signal.SIGINT, handler)
