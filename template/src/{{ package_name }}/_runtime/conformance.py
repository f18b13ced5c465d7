"""``check_resource``: attack a context-manager class where the contract can break.

The checks, in turn: the block's exceptions pass through unchanged, every way
out of the block releases, closing twice is harmless and use after close raises
``ClosedResourceError``, re-entry raises ``ReentryError``, an object collected
while held warns, and no interrupt or failed system call leaves anything held
(``_faults`` injects them; ``snapshot`` tells what is held).  ``_Checker`` holds
the state that ``async_conformance`` shares.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import gc
import os
import signal
import socket
import threading
import time
import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from ._faults import (
    _caused_by,
    _enter,
    _exit,
    _noted,
    _release_fully,
    _resource_warnings_raised,
    _Sweep,
)
from ._process import (
    _fd_is_open,
    _loop_tasks,
    _open_fds,
    _OrphanAdoption,
    _task_description,
)
from .errors import ClosedResourceError, ReentryError
from .snapshot import ResourceSnapshot

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from contextlib import AbstractContextManager


class ContractError(AssertionError):
    """Raised by ``check_resource`` when a class breaks the resource contract."""


class _BodyError(Exception):
    """Raised inside a ``with`` block by the checker."""


_RAISED = "raised in the body"
_OS_ERRORS: tuple[tuple[type[OSError], int], ...] = (
    (OSError, errno.EIO),
    (BlockingIOError, errno.EAGAIN),
    (ChildProcessError, errno.ECHILD),
    (BrokenPipeError, errno.EPIPE),
    (ConnectionAbortedError, errno.ECONNABORTED),
    (ConnectionRefusedError, errno.ECONNREFUSED),
    (ConnectionResetError, errno.ECONNRESET),
    (FileExistsError, errno.EEXIST),
    (FileNotFoundError, errno.ENOENT),
    (InterruptedError, errno.EINTR),
    (IsADirectoryError, errno.EISDIR),
    (NotADirectoryError, errno.ENOTDIR),
    (PermissionError, errno.EACCES),
    (ProcessLookupError, errno.ESRCH),
    (TimeoutError, errno.ETIMEDOUT),
    (socket.gaierror, socket.EAI_NONAME),
    (socket.herror, 1),  # HOST_NOT_FOUND
)
"""Each ``OSError`` class a release might treat apart (``except
BrokenPipeError:``, ``errno == EPIPE``), with the ``errno`` it comes with."""
_BODY_CHECKS = (
    "exception in the body",
    "OSError subclasses in the body",
    "KeyboardInterrupt in the body",
    "SystemExit in the body",
    "exception groups in the body",
)


def _body_errors() -> list[BaseException]:
    """A new instance of each exception the checker raises in a block, in turn.

    An ordinary exception; each ``OSError`` class of ``_OS_ERRORS``;
    ``KeyboardInterrupt`` and ``SystemExit``, which are not ``Exception``; an
    ``ExceptionGroup`` (of an ``OSError`` and an ordinary exception) and a
    ``BaseExceptionGroup`` (with a ``KeyboardInterrupt`` in it), which
    ``except*`` code takes apart.
    """
    errors: list[BaseException] = [_BodyError(_RAISED)]
    errors += [kind(number, _RAISED) for kind, number in _OS_ERRORS]
    errors += [KeyboardInterrupt(_RAISED), SystemExit(_RAISED)]
    members = [ConnectionResetError(errno.ECONNRESET, _RAISED), _BodyError(_RAISED)]
    errors.append(ExceptionGroup(_RAISED, members))
    errors.append(BaseExceptionGroup(_RAISED, [KeyboardInterrupt(_RAISED)]))
    return errors


def _kind_of(error: BaseException) -> str:
    return type(error).__qualname__


def _swallowed(error: BaseException, how: str) -> str:
    """The message for a block whose *error* did not come out of it."""
    return (
        f"the body's exception was swallowed: {error!r} was raised in the block and "
        f"{how} (an exception in the body must propagate unchanged)"
    )


def _expect_unchanged(error: BaseException, raised: BaseException) -> None:
    """Fail unless *raised*, what came out of a block that raised *error*, is it.

    The very object, not an equal one: ``raise type(exc)(...)`` or ``raise
    RuntimeError(...) from exc`` in an exit replace it.  The class's own
    exception is the ``ContractError``'s cause.
    """
    if raised is not error:
        msg = (
            f"the body's exception was replaced: {error!r} was raised in the block "
            f"and {raised!r} came out of it (an exception in the body must "
            "propagate unchanged)"
        )
        raise ContractError(msg) from raised


@dataclass(frozen=True, slots=True)
class ContractReport:
    """What ``check_resource`` or ``check_async_resource`` verified."""

    checks: tuple[str, ...]
    """The contract checks that passed, by name."""
    interrupts: int
    """``KeyboardInterrupt`` (or, for async classes, cancellations) injected."""
    failed_calls: int
    """System calls made to fail, one at a time, during acquisition and release."""
    released_by_finalizer: int
    """Injected faults after which a standard-library object was dropped and
    released by its own finalizer (a ``ResourceWarning`` of the standard library)."""


M = TypeVar("M")


def _run_phase(
    phase: str,
    made: list[Any],
    factory: Callable[[], AbstractContextManager[Any]],
    checker: _Checker,
    body_error: _BodyError,
) -> bool:
    """Run *phase* on the object in *made* (made here for ``"enter"``).

    Returns whether ``__exit__`` swallowed *body_error*.
    """
    if phase == "enter":
        made.append(checker.make(factory))
        _enter(made[0])
    elif phase == "exit":
        _exit(made[0], None)
    elif phase == "close":
        made[0].close()
    else:
        return bool(_exit(made[0], body_error))
    return False


class _Checker:
    """The state shared by the checks of one class: what was held before, warnings."""

    def __init__(self, released: Callable[[], bool] | None, settle: float) -> None:
        self.made: list[object] = []
        self.released = released
        self.settle = settle
        self.baseline = ResourceSnapshot._fingerprint()
        self.checks: list[str] = []
        self.faults = {"interrupt": 0, "call": 0}
        self.by_finalizer = 0
        self.caught: list[warnings.WarningMessage] = []
        self.tasks_before = _loop_tasks()

    def held_at_once(self, what: str) -> None:
        """``held()``, which collects garbage, only if something is held now.

        What an object released by itself is free without a collection (tens of
        milliseconds in a test session): only if something is still held does
        ``held()`` collect, wait and name it.
        """
        if ResourceSnapshot._fingerprint().leaks_since(self.baseline) or (
            self.released is not None and not self.released()
        ):
            self.held(what)
        else:
            self.made.clear()

    def held(self, what: str, *, probe: bool = True) -> None:
        """Fail if anything is held now that was not held before the checks.

        Threads and peers wind down in their own time: a leak must last
        ``settle`` seconds to count.  Without *probe*, the ``released`` probe is
        not asked.
        """
        for _ in self._settling(what, probe=probe):
            time.sleep(0.005)

    async def aheld_at_once(self, what: str) -> None:
        """``aheld()`` only if something is held now (see ``held_at_once``)."""
        await asyncio.sleep(0)
        if (
            ResourceSnapshot._fingerprint().leaks_since(self.baseline)
            or self._new_tasks()
            or (self.released is not None and not self.released())
        ):
            await self.aheld(what)
        else:
            self.made.clear()

    async def aheld(self, what: str, *, tasks_at_once: bool = True) -> None:
        """``held()`` that lets the event loop run while it waits, tasks included.

        When ``aclose()`` has returned, every task the object started has ended:
        one turn of the event loop is allowed, for a task it cancelled last.  With
        *tasks_at_once* false (an object the collector released, which cannot
        await), its tasks may take ``settle`` seconds, like threads.  From Python
        3.12 asyncio reaps a killed child through the loop itself.
        """
        await asyncio.sleep(0)
        running = self._new_tasks()
        if running and tasks_at_once:
            raise ContractError(f"{what} left running: {', '.join(running)}")
        for _ in self._settling(what, tasks=True):
            await asyncio.sleep(0.005)

    def _new_tasks(self) -> list[str]:
        return [
            f"task {_task_description(task)}"
            for task in _loop_tasks() - self.tasks_before
            if task is not asyncio.current_task()
        ]

    def _settling(
        self,
        what: str,
        *,
        probe: bool = True,
        tasks: bool = False,
    ) -> Iterator[None]:
        """Look for what is held until nothing is; yield whenever something is.

        The wait between two looks is the caller's (a sleep, or the event loop's
        turn).  Fails with ``ContractError`` naming what is still held once
        ``settle`` seconds have passed; forgets the objects made once nothing is.
        """
        deadline = time.monotonic() + self.settle
        while True:
            gc.collect()
            late = time.monotonic() > deadline
            leaks = ResourceSnapshot._fingerprint(describe=late).leaks_since(
                self.baseline
            )
            if tasks:
                leaks += self._new_tasks()
            if probe and self.released is not None and not self.released():
                leaks.append("the resource, by the released() probe")
            if not leaks:
                self.made.clear()
                return
            if late:
                raise ContractError(f"{what} left held: {', '.join(leaks)}")
            yield

    def make(self, factory: Callable[[], M]) -> M:
        """Make an object to check, remembered until the next ``held()`` passes."""
        manager = factory()
        self.made.append(manager)
        return manager

    def release_made(self) -> None:
        """Close what the checks made and left held (after a failed check)."""
        for manager in self.made:
            _release_fully(manager)
        self.made.clear()
        gc.collect()

    def count_finalized(self) -> None:
        """Count standard-library objects released by their finalizer, then forget."""
        self.by_finalizer += sum(
            issubclass(w.category, ResourceWarning) for w in self.caught
        )
        self.caught.clear()

    def collected_warns(self) -> None:
        """Fail unless an object collected while held emitted a ResourceWarning."""
        gc.collect()
        if not any(issubclass(w.category, ResourceWarning) for w in self.caught):
            msg = "an object collected while held emitted no ResourceWarning"
            raise ContractError(msg)
        self.caught.clear()

    def report(self) -> ContractReport:
        """What was checked, once every check passed."""
        unexpected = [
            w for w in self.caught if not issubclass(w.category, ResourceWarning)
        ]
        for w in unexpected:
            warnings.warn_explicit(
                w.message, w.category, w.filename, w.lineno, source=w.source
            )
        return ContractReport(
            tuple(self.checks),
            self.faults["interrupt"],
            self.faults["call"],
            self.by_finalizer,
        )


def check_resource(
    factory: Callable[[], AbstractContextManager[Any]],
    *,
    use: Callable[[Any], object] | None = None,
    released: Callable[[], bool] | None = None,
    interrupts: bool = True,
    stdlib_interrupts: bool = True,
    failed_calls: bool = True,
    limit: int = 2000,
    settle: float = 1.0,
) -> ContractReport:
    """Check that the objects *factory* makes keep the resource contract.

    Every check makes a new object with *factory* (each call must return a new,
    unentered context manager) and fails with ``ContractError`` naming the broken
    promise:

    * ``with`` acquires and releases: nothing is held afterwards (descriptors,
      threads, child processes, and *released*, a probe that returns true when
      the resource is free), and ``closed`` is true if the class has it; on
      Linux the check adopts orphans, as ``LeakCheck`` does, so a process that
      a child started and left behind counts as held;
    * an exception in the body propagates unchanged, and everything is released.
      Blocks raise, one each, every exception whose kind a release may treat
      apart: an ordinary ``Exception``; ``OSError`` and each of its subclasses
      that a release might special-case (``BlockingIOError``,
      ``ChildProcessError``, ``BrokenPipeError`` and the other
      ``ConnectionError`` classes, ``FileExistsError``, ``FileNotFoundError``,
      ``InterruptedError``, ``IsADirectoryError``, ``NotADirectoryError``,
      ``PermissionError``, ``ProcessLookupError``, ``TimeoutError``,
      ``socket.gaierror``, ``socket.herror``), each with its ``errno``;
      ``KeyboardInterrupt`` and ``SystemExit``, which are not ``Exception``; an
      ``ExceptionGroup`` and a ``BaseExceptionGroup``, which ``except*`` takes
      apart.  Each must come out of the ``with`` statement as the very object
      raised (identity, not equality): an exit that returns true for it, or
      raises another exception (a copy, or one of its own ``from`` it), fails
      with ``ContractError`` saying that the body's exception was swallowed or
      replaced and naming it, chained from the exception that came out instead.
      An exit that is right for the one exception a test happens to raise may
      swallow a ``BrokenPipeError`` as "the peer went away", or a
      ``KeyboardInterrupt`` as "stop quietly", and the code after the block then
      runs as if nothing had happened;
    * a second ``with``, inside or after the first, raises ``ReentryError``;
    * ``close()``, if the class has it, may be called twice after the block, and
      the second call closes no descriptor that the process opened meanwhile
      (one that took the number the block released);
    * *use*, called with the object, works inside the block and raises
      ``ClosedResourceError`` after it;
    * an object collected while it holds its resource emits a
      ``ResourceWarning`` and releases it, also when that warning is an error
      (``filterwarnings = error``, ``-W error``), so it must release first;
    * with *interrupts*, ``KeyboardInterrupt`` is raised at every point inside
      the *factory* call and ``__enter__``, ``__exit__`` (after a block that
      succeeded, and after one that raised) and ``close()`` where the
      interpreter could deliver one (a deterministic sweep by a trace function:
      each function's start, each loop's jump back, each return from a C
      function, and in place of each C call that may wait, such as
      ``os.waitpid`` or ``lock.acquire``, which a signal interrupts; in the
      standard library too, but not inside a block that defers interrupts, where
      a real one would wait); after each, the interrupt propagates and nothing
      stays held once ``close()`` has run (with ``stdlib_interrupts=False``,
      points inside the standard library's own Python code are skipped, but for
      the start of each standard-library function the class calls: use it for a
      class built on one that is not interrupt-safe itself, such as
      ``threading.Semaphore``, and document that window, or to keep the sweep
      of a deep call such as ``urlopen`` short);
    * with *failed_calls*, each call that those same phases make into a C
      function of an I/O module (``os``, ``io``, ``socket``, ``select``,
      ``sqlite3``, ``_posixsubprocess``, ``fcntl``), and each ``io.FileIO()``,
      ``socket.socket()`` and ``mmap.mmap()`` (seen by their audit events), fails
      with ``OSError``, one at a time: the injected error (or one raised because
      of it) propagates, or, in the exit of a block that raised, goes with the
      block's exception as a note; and nothing stays held once ``close()`` has
      run.  A release that a failed call stopped may leave what it had still to
      do (a failed ``unlink`` leaves its file): after a failure injected into
      ``__exit__`` or ``close()``, *released* is not asked, and only
      descriptors, threads and children must be free.  A C type that raises no
      audit event (``select.epoll()``) is not made to fail.

    The interrupt sweep must run in the main thread, where Python raises
    ``KeyboardInterrupt``; it puts Python's ``SIGINT`` handler in place for its
    length if the signal is ignored (as in a background job) or left to the
    system.  Whatever must be released is given *settle* seconds to go (threads end,
    peers close).  At most *limit* faults of each kind are injected per phase.  A
    standard-library object dropped by an injected fault may be released by its
    own finalizer: its ``ResourceWarning`` is counted in the report, not raised.
    Each injected fault is dropped, traceback and all, before the check looks,
    as a program that handles it and goes on drops it: what only the
    interrupted frames held is released then, by its finalizer.  A class whose
    release leaves something to those frames (a local it never closed) passes;
    a test of its own that keeps the exception (as ``pytest.raises(...) as
    caught``, a logger or ``sys.last_exc`` keeps it) across a ``LeakCheck``
    catches it.  The failed-call sweep adds an audit hook (``sys.addaudithook``)
    once: it stays for the life of the interpreter and does nothing outside a
    sweep.
    """
    checker = _Checker(released, settle)
    with _OrphanAdoption(), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ResourceWarning)
        checker.caught = caught
        try:
            closable = _check_lifecycle(factory, use, checker)
            phases = _PHASES if closable else _PHASES[:-1]
            if interrupts:
                with _interrupts_raised():
                    for phase in phases:
                        sweep = _Sweep("interrupt", 0, stdlib=stdlib_interrupts)
                        checker.faults["interrupt"] += _sweep(
                            factory, sweep, phase, limit, checker
                        )
                checker.checks.append("interrupt sweep")
            if failed_calls:
                for phase in phases:
                    checker.faults["call"] += _sweep(
                        factory, _Sweep("call", 0), phase, limit, checker
                    )
                checker.checks.append("failed system calls")
        finally:
            checker.release_made()
    return checker.report()


@contextlib.contextmanager
def _interrupts_raised() -> Iterator[None]:
    """Give ``SIGINT`` Python's handler for the length of an interrupt sweep.

    A real ``KeyboardInterrupt`` comes only from that handler, and
    ``deferred_interrupts()`` holds one back only while a Python handler is in
    place.  A process started in the background inherits ``SIGINT`` ignored; a
    sweep there would inject interrupts into blocks that defer them.
    """
    if threading.current_thread() is not threading.main_thread():
        msg = "the interrupt sweep must run in the main thread (interrupts=False)"
        raise RuntimeError(msg)
    previous = signal.getsignal(signal.SIGINT)
    if previous not in {signal.SIG_IGN, signal.SIG_DFL}:
        yield
        return
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def _raise(error: BaseException) -> None:
    raise error


def _check_body_errors(
    factory: Callable[[], AbstractContextManager[Any]], checker: _Checker
) -> None:
    """Raise each of ``_body_errors()`` in a block: it must come out, released."""
    for error in _body_errors():
        manager = checker.make(factory)
        try:
            with manager:
                _raise(error)
        except BaseException as raised:  # noqa: BLE001 - each must come out
            _expect_unchanged(error, raised)
        else:
            raise ContractError(_swallowed(error, "the code after the block ran"))
        finally:
            error.__traceback__ = None  # its frames would keep the object alive
        _expect_closed(manager)
        checker.held_at_once(f"a block that raised {_kind_of(error)}")
    checker.checks += list(_BODY_CHECKS)


def _check_lifecycle(
    factory: Callable[[], AbstractContextManager[Any]],
    use: Callable[[Any], object] | None,
    checker: _Checker,
) -> bool:
    """Check the lifecycle; return whether the class has ``close()``."""
    manager = checker.make(factory)
    with manager:
        if use is not None:
            use(manager)
        during = _open_fds()
    _expect_closed(manager)
    checker.held("a plain block")
    close = getattr(manager, "close", None)
    if close is not None:
        with _reused_descriptors_kept(during, "close() after the block"):
            try:
                close()  # the end of the block closed it: the second time
            except Exception as failure:
                msg = f"close() after the block raised {failure!r}"
                raise ContractError(msg) from failure
        checker.checks.append("close twice")
    if use is not None:
        _expect_raises(ClosedResourceError, use, manager, "use after close")
        checker.checks.append("use after close")
    checker.made.append(manager)  # released at the end if it can be re-entered
    _expect_raises(ReentryError, _enter, manager, "a second with after the first")
    checker.checks += ["with", "re-entry after exit"]

    _check_body_errors(factory, checker)

    nested = checker.make(factory)
    with nested:
        _expect_raises(ReentryError, _enter, nested, "a nested second with")
    checker.held("a block entered twice")
    checker.checks.append("re-entry inside the block")

    _enter(factory())
    checker.collected_warns()
    checker.held("an object collected while held")
    with _resource_warnings_raised():
        _enter(factory())
        gc.collect()
    checker.held("an object collected while held, with ResourceWarning an error")
    checker.checks.append("collected while held")
    return close is not None


_PHASES = ("enter", "exit", "exit of a block that raised", "close")
"""Where faults are injected: the factory call and ``__enter__``, ``__exit__``
after a block that succeeded and after one that raised, and ``close()``."""


def _sweep(
    factory: Callable[[], AbstractContextManager[Any]],
    sweep: _Sweep,
    phase: str,
    limit: int,
    checker: _Checker,
) -> int:
    """Inject one fault at each point of *phase* in turn; return how many."""
    for target in range(limit):
        made: list[Any] = []
        if phase != "enter":
            made.append(checker.make(factory))
            _enter(made[0])
        sweep = _Sweep(sweep.kind, target, stdlib=sweep.stdlib)
        body_error = _BodyError("raised in the body")
        swallowed = False
        try:
            with sweep:
                swallowed = _run_phase(phase, made, factory, checker, body_error)
        except BaseException as error:
            if sweep.fired is None or not _caused_by(error, sweep.fired):
                msg = f"{sweep.fired!r} was injected in {phase}, {error!r} propagated"
                raise ContractError(msg) from error
        else:
            if sweep.fired is not None and not _noted(body_error, sweep.fired):
                msg = f"{sweep.fired!r} injected in {phase} was swallowed"
                raise ContractError(msg)
            if swallowed:
                raise ContractError(f"the body's exception was swallowed in {phase}")
        if sweep.fired is None and phase == "enter":
            _exit(made[0], None)  # entered with no fault: the block ends, for a
            # class without close() too
        while made:
            _release_fully(made.pop())
        if sweep.fired is None:
            return target
        fault = repr(sweep.fired)
        sweep.fired.__traceback__ = None  # its frames would keep dropped objects alive
        checker.count_finalized()
        # What a failed release call would have released, it could not: the
        # probe is not asked; descriptors, threads and children must be free.
        failed_release = sweep.kind == "call" and phase != "enter"
        checker.held(f"{fault} in {phase}", probe=not failed_release)
    return limit


@contextlib.contextmanager
def _reused_descriptors_kept(during: dict[int, str], what: str) -> Iterator[None]:
    """Fail if *what* closes a descriptor at a number that the block released.

    Each number open in the block (*during*) and free now is taken by a new
    descriptor first (a new one takes the lowest free number): a second close
    that closes such a number again closes somebody else's file.
    """
    freed = {fd for fd in during if not _fd_is_open(fd)}
    sentinels: dict[int, os.stat_result] = {}
    try:
        for _ in range(max(freed, default=-1) + 1):  # a number can be taken meanwhile
            if not freed - sentinels.keys():
                break
            fd = os.open(os.devnull, os.O_RDONLY)
            sentinels[fd] = os.fstat(fd)
        yield
        closed = [fd for fd, opened in sentinels.items() if not _still(fd, opened)]
        if closed:
            msg = f"{what} closed file descriptor {closed[0]}, no longer its own"
            raise ContractError(msg)
    finally:
        for fd, opened in sentinels.items():
            if _still(fd, opened):
                os.close(fd)


def _still(fd: int, opened: os.stat_result) -> bool:
    """Whether *fd* is still the descriptor that *opened* describes."""
    try:
        return os.path.samestat(os.fstat(fd), opened)
    except OSError:
        return False


def _expect_closed(manager: object) -> None:
    if getattr(manager, "closed", True) is not True:
        raise ContractError(f"{manager!r}.closed is not true after its block")


def _expect_raises(
    kind: type[BaseException],
    action: Callable[[Any], object],
    argument: object,
    what: str,
) -> None:
    try:
        action(argument)
    except kind:
        return
    except BaseException as error:
        raise ContractError(f"{what} raised {error!r}, not {kind.__name__}") from error
    raise ContractError(f"{what} raised nothing, not {kind.__name__}")
