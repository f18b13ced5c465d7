"""Test tools for the resources' tests: a forked child, a thread, a signal at one point.

``left_in_child`` (and ``async_left_in_child``) forks inside a block and lets the
child leave it first; ``run_in_child`` runs a function in a forked child.  In
either, the test fails if anything raised or warned in the child.
``in_another_thread`` runs a function in a thread and hands back what it raised.
``raising_handler``, ``signal_at_line``, ``signal_at_c_return`` and
``sigint_once_in`` deliver a signal whose Python handler raises at one exact
point.  The project's tests import them from here; they need ``pytest`` for
``RAISING_SIGNALS`` alone.
"""

from __future__ import annotations

import contextlib
import gc
import os
import select
import signal
import sys
import threading
import time
import traceback
import warnings
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

import pytest

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable, Iterator
    from contextlib import AbstractAsyncContextManager, AbstractContextManager
    from types import CodeType, FrameType, TracebackType

_T = TypeVar("_T")


class LeftInChild(Exception):  # noqa: N818 - what the child raises, not an error
    """Raised by a child forked inside a block, to leave that block by an exception."""


def _fork() -> int:
    """``os.fork()``, without the warning for the threads of the parent.

    From Python 3.12 ``os.fork()`` warns (``DeprecationWarning``) in a process
    that runs other threads, such as pytest-xdist's worker or a pool under
    test; raised as an error, it would come after the child was made.  The
    child only runs the test's few lines in the forking thread and ends with
    ``os._exit()``: none of the locks those threads may hold is taken there.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return os.fork()


class _ChildRecord(list[str]):
    """In the child: what went wrong, warnings and unraisable errors included.

    The filters and the hook it puts in are never put back: the child ends with
    ``os._exit()``.
    """

    def __init__(self) -> None:
        super().__init__()
        self._caught = warnings.catch_warnings(record=True).__enter__()
        warnings.simplefilter("always")
        sys.unraisablehook = lambda raised: self.append(
            f"unraisable in {raised.object!r}: {raised.exc_value!r}"
        )

    def end(self, report: int) -> NoReturn:
        """Collect garbage, then end the child: 0 if nothing went wrong, else 1."""
        gc.collect()  # the finalizers of what the child dropped, in the child
        found = [*self, *(f"{w.category.__name__}: {w.message}" for w in self._caught)]
        try:
            with contextlib.suppress(OSError):
                os.write(report, "\n".join(found).encode()[:60_000])
        finally:
            os._exit(1 if found else 0)  # never back into pytest


def _wait_for_child(pid: int, report: int) -> None:
    """Fail the test unless the child *pid* ended with status 0, within 30 s."""
    story = b""
    deadline = time.monotonic() + 30.0
    try:
        while (left := deadline - time.monotonic()) > 0:
            if select.select([report], [], [], left)[0]:
                chunk = os.read(report, 65536)
                if not chunk:
                    break
                story += chunk
        else:
            os.kill(pid, signal.SIGKILL)
    finally:
        os.close(report)
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        msg = f"the forked child ended with {code}:\n{story.decode()}"
        raise AssertionError(msg)


def run_in_child(function: Callable[[], object]) -> None:
    """Run *function* in a process forked here; fail if it raised or warned there.

    The child then collects its garbage, so that a finalizer that warns or fails
    there (a ``ResourceWarning``, an unraisable error) fails the test too, and
    ends with ``os._exit()``, never returning into pytest.
    """
    read_end, write_end = os.pipe()
    pid = _fork()
    if pid == 0:
        os.close(read_end)
        record = _ChildRecord()
        try:
            function()
        except BaseException:  # noqa: BLE001 - reported to the parent
            record.append(traceback.format_exc())
        record.end(write_end)
    os.close(write_end)
    _wait_for_child(pid, read_end)


def in_another_thread(
    call: Callable[[], object], timeout: float = 10.0
) -> list[BaseException]:
    """Run *call* in a new thread and wait for it; what it raised, if anything.

    The test fails if the thread still runs after *timeout* seconds.
    """
    raised: list[BaseException] = []

    def run() -> None:
        try:
            call()
        except BaseException as error:  # noqa: BLE001 - handed to the test
            raised.append(error)

    thread = threading.Thread(target=run, name="in_another_thread", daemon=True)
    thread.start()
    thread.join(timeout)
    if thread.is_alive():
        pytest.fail(f"{call!r} still ran in another thread after {timeout} s")
    return raised


@contextlib.contextmanager
def left_in_child(
    manager: AbstractContextManager[_T],
    *,
    raising: bool,
    before: Callable[[_T], object] | None = None,
    inside: Callable[[_T], object] | None = None,
    then: Callable[[_T], object] | None = None,
) -> Iterator[_T]:
    """Enter *manager*, fork in its block, and let the child leave the block first.

    *before* runs in the block, with what the block got, before the fork.  The
    child runs *inside* in the block, leaves the block (a real ``with``)
    normally, or by raising ``LeftInChild`` if *raising*, then runs *then*, and
    ends as ``run_in_child``'s child does: the test fails if anything raised
    there (the block's end included), or warned.  The parent waits for the
    child, then yields what its block got: the test checks the parent's
    resource, and the parent's block ends when the test's does.
    """
    block = _ForkedBlock(raising=raising)
    with block, manager as entered:
        if block.fork(entered, before, inside):
            yield entered
    if block.pid == 0:
        block.finish(then, entered)


@contextlib.asynccontextmanager
async def async_left_in_child(
    manager: AbstractAsyncContextManager[_T],
    *,
    raising: bool,
    before: Callable[[_T], object] | None = None,
    inside: Callable[[_T], object] | None = None,
    then: Callable[[_T], object] | None = None,
) -> AsyncIterator[_T]:
    """``left_in_child`` for ``async with``: the child leaves without awaiting.

    The child never goes back to the event loop, whose selector it shares with
    the parent: if the block's end suspended in the child, the child would hang,
    and the parent's wait fails the test after 30 s.
    """
    block = _ForkedBlock(raising=raising)
    with block:
        async with manager as entered:
            if block.fork(entered, before, inside):
                yield entered
    if block.pid == 0:
        block.finish(then, entered)


class _ForkedBlock:
    """A fork inside a block, the part ``left_in_child`` and its async twin share.

    In the parent it waits for the child; in the child it records what went
    wrong from the fork on, and ends the child.
    """

    def __init__(self, *, raising: bool) -> None:
        self.raising = raising
        self.read_end, self.write_end = os.pipe()
        self.pid = -1
        self.record: _ChildRecord | None = None

    def fork(
        self,
        entered: _T,
        before: Callable[[_T], object] | None,
        inside: Callable[[_T], object] | None,
    ) -> bool:
        """Fork in the block: true in the parent, once the child has ended.

        The child runs *inside*, then leaves the block, by raising
        ``LeftInChild`` if ``raising``.
        """
        if before is not None:
            before(entered)
        self.pid = _fork()
        if self.pid != 0:
            os.close(self.write_end)
            _wait_for_child(self.pid, self.read_end)
            return True
        os.close(self.read_end)
        self.record = _ChildRecord()
        if inside is not None:
            inside(entered)
        if self.raising:
            raise LeftInChild
        return False

    def __enter__(self) -> None:
        pass

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        error: BaseException | None,
        traceback_: TracebackType | None,
    ) -> bool:
        """Record in the child how the block ended, and keep its error there.

        In the parent (and before the fork) an error goes on.  In the child it
        is recorded unless expected, and a normal end is wrong if it had to
        raise.
        """
        if self.pid != 0:
            return False
        if self.record is None:  # an error that came as the child began
            self.record = _ChildRecord()
        if error is None:
            if self.raising:
                self.record.append("the block's end swallowed LeftInChild")
        elif not (self.raising and isinstance(error, LeftInChild)):
            self.record.append("".join(traceback.format_exception(error)))
        return True

    def finish(self, then: Callable[[_T], object] | None, entered: _T) -> NoReturn:
        """In the child: run *then*, then end the child with its record."""
        record = self.record if self.record is not None else _ChildRecord()
        try:
            if then is not None:
                then(entered)
        except BaseException:  # noqa: BLE001 - reported to the parent
            record.append(traceback.format_exc())
        record.end(self.write_end)


# Signals whose Python handler raises, sent at one exact point.  A server turns
# SIGTERM into SystemExit, a timer raises from its SIGALRM handler: Python runs
# those handlers where it runs SIGINT's.  A trace or profile hook sends the
# signal, and Python runs the handler at its next check, as it would for a
# signal sent from outside.

RAISING_SIGNALS = [
    pytest.param(signal.SIGALRM, KeyboardInterrupt, id="SIGALRM-KeyboardInterrupt"),
    pytest.param(signal.SIGTERM, SystemExit, id="SIGTERM-SystemExit"),
]
"""``(signum, error)`` parameters: each signal with the error its handler raises."""


@contextlib.contextmanager
def raising_handler(
    signum: int, error: type[BaseException], calls: list[int] | None = None
) -> Iterator[Callable[[int, FrameType | None], None]]:
    """Give *signum* a Python handler that raises *error* (and appends to *calls*)."""

    def handler(number: int, frame: FrameType | None) -> None:
        if calls is not None:
            calls.append(number)
        raise error(f"signal {number}")

    previous = signal.signal(signum, handler)
    try:
        yield handler
    finally:
        signal.signal(signum, previous)


@contextlib.contextmanager
def signal_at_line(code: CodeType, line: int, signum: int) -> Iterator[list[bool]]:
    """Send *signum* to this thread once, when *code* runs *line*."""
    fired: list[bool] = []

    def local(frame: FrameType, event: str, arg: object) -> Any:  # noqa: ANN401
        if event == "line" and frame.f_lineno == line and not fired:
            fired.append(True)
            signal.raise_signal(signum)  # handled right here, or held back
        return local

    def tracer(frame: FrameType, event: str, arg: object) -> Any:  # noqa: ANN401
        return local if frame.f_code is code else None

    previous = sys.gettrace()
    sys.settrace(tracer)
    try:
        yield fired
    finally:
        sys.settrace(previous)


@contextlib.contextmanager
def signal_at_c_return(function: str, signum: int) -> Iterator[list[bool]]:
    """Send *signum* to this thread once, when the C function *function* returns."""
    fired: list[bool] = []

    def hook(frame: FrameType, event: str, arg: object) -> None:
        if event == "c_return" and getattr(arg, "__name__", "") == function:
            sys.setprofile(None)
            fired.append(True)
            signal.raise_signal(signum)  # handled right here, or held back

    sys.setprofile(hook)
    try:
        yield fired
    finally:
        sys.setprofile(None)


@contextlib.contextmanager
def sigint_once_in() -> Iterator[Callable[[CodeType], None]]:
    """Send the main thread one real ``SIGINT`` once it runs a given code object.

    In the block, ``start(function.__code__)`` starts a thread that watches the
    main thread's stack and sends the signal 50 ms after *function* appears in
    it, time enough to reach a wait inside; the threads are joined as the block
    ends.  A project's ``conftest.py`` offers it as the fixture of that name.
    """
    main = threading.get_ident()
    watchers: list[threading.Thread] = []

    def watch(code: CodeType) -> None:
        deadline = time.monotonic() + 10.0
        while time.monotonic() < deadline:
            frame = sys._current_frames().get(main)
            while frame is not None and frame.f_code is not code:
                frame = frame.f_back
            if frame is not None:
                time.sleep(0.05)  # from the call's start to its wait
                signal.pthread_kill(main, signal.SIGINT)
                return
            time.sleep(0.001)

    def start(code: CodeType) -> None:
        watcher = threading.Thread(target=watch, args=(code,), name="sigint-once-in")
        watchers.append(watcher)
        watcher.start()

    try:
        yield start
    finally:
        for watcher in watchers:
            watcher.join()
