"""The contract every context manager of the package keeps, written once.

``Resource`` owns the lifecycle of a synchronous context manager: the state, the
re-entry guard, ``closed``, the errors raised on misuse, the release on every way
out of the block, the ``ResourceWarning`` and release when an object is collected
while it still holds its resource, and the registration that lets
``testing`` find such objects.  A subclass writes only how it
acquires (``_acquire``) and how it releases (``_release``).  The asynchronous
twin, ``AsyncResource``, lives in ``_async_resource``, which only asynchronous
classes import (it imports ``asyncio``).

Interrupts.  ``KeyboardInterrupt`` can be raised wherever the interpreter checks
for signals: when a Python function starts, at a loop's jump back, and right after
a call into C code returns.  The protocol below makes every such point safe.

* ``__enter__`` marks the object as acquiring *before* ``_acquire`` runs, and
  ``_acquire`` records each piece on the object as soon as the piece exists.  If
  anything interrupts it, ``__enter__`` calls ``_release``, which releases exactly
  what was recorded.  Between a C call returning a new object and the store that
  records it there is one such point: an object that owns its resource (a file,
  a socket, a connection) is released by its own finalizer when it is dropped
  there, and a resource that no object owns (a lock) is recorded by the C call
  itself (see ``record_call``).
* The state becomes closed only after ``_release`` has returned or raised an
  ordinary ``Exception``.  An interrupted release leaves the object held, so that
  ``close()``, or the collection finalizer, runs ``_release`` again: each step of
  ``_release`` is either safe to repeat (closing a file twice is harmless) or
  forgets its piece and releases it with no signal check in between
  (``lock, self._lock = self._lock, None`` and then a C-level ``lock.release()``).
* Where the standard library itself has such a point inside steps that must not
  be separated (``subprocess.Popen`` starting its child, ``Thread.start``,
  ``threading.Semaphore``), or where a class must wrap what a C call returned
  before recording it (``socket`` accepting a connection), the steps run inside
  ``with deferred_interrupts():``, which holds ``KeyboardInterrupt`` back until
  they are over.

fork().  Each object records the process that acquired: the states that say
it holds something, ``OPENING`` and ``OPEN``, are objects of this process, and a
child forked from it makes its own (``_forked``, an ``os.register_at_fork``
hook), equal to them but not the same.  So the state that ``__enter__`` stores
anyway is the record, and the check that the block's end makes anyway becomes
one identity comparison (``state is OPEN``).  A block left, an object closed or
collected, in a process forked inside the block runs ``_release_copy()`` instead
of ``_release``: it releases only what is the child's own copy (a descriptor),
never what belongs to the process that acquired (a file replaced, a directory
removed, a child process killed, a socket shut down).
"""

from __future__ import annotations

import collections
import functools
import gc
import itertools
import os
import signal
import sys
import threading
import time
import warnings
from typing import TYPE_CHECKING, Generic, TypeVar

from ._cleanup import (
    _get_handler,
    put_back_handlers,
    raise_signals,
    raise_unless_noted,
    replace_python_handlers,
)
from .errors import ClosedResourceError, ReentryError

if TYPE_CHECKING:
    from collections.abc import Callable
    from types import FrameType, TracebackType

    from ._cleanup import Handler

__all__ = [
    "WAIT_SLICE",
    "InterruptDeferral",
    "Lifecycle",
    "Resource",
    "close_copy",
    "close_recorded",
    "deferred_interrupts",
    "join_thread",
    "live_resources",
    "misuse_error",
    "record_call",
    "tracked_resource",
]

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)
V = TypeVar("V")
TypeT = TypeVar("TypeT", bound=type)

NEW, OPENING, OPEN, CLOSED = "new", "opening", "open", "closed"
HELD = frozenset((OPENING, OPEN))
"""The states in which an object may hold something that must be released (a set:
one hash probe, where a tuple compares the strings)."""
RELEASING = "releasing"
"""The state while one thread runs ``_release``: the claim that keeps a second
thread (a ``close()`` racing the block's exit) from running it too."""

_RACE_POLL = 0.0005
"""Seconds between two looks at an object that another thread is releasing."""

_MISUSE = {
    NEW: "was never entered",
    OPENING: "is still acquiring its resource",
    RELEASING: "is being closed",
    CLOSED: "is closed",
}


_PID = os.getpid()
"""The id of this process, kept by ``_forked`` in a child forked from it."""


def _forked() -> None:
    """Give the child states of its own: an ``os.register_at_fork`` hook.

    ``OPENING`` and ``OPEN`` become new strings, equal to the parent's (so that
    ``HELD``, ``_MISUSE`` and every ``==`` take both) but not the same objects:
    an object whose state ``is`` neither was acquired by another process.  The
    check costs nothing that the block did not do already, where recording
    ``os.getpid()`` would add a store to each block and a comparison to each
    exit, and ``os.getpid()`` is a system call (glibc stopped caching the pid in
    2.25) of about 0.3 us.  Like ``random`` and ``multiprocessing``, it relies on
    ``os.register_at_fork``, which ``os.fork()``, ``os.forkpty()`` and
    ``multiprocessing`` run, and which a C extension calling ``fork()`` itself
    bypasses.
    """
    global OPENING, OPEN, RELEASING, _PID  # noqa: PLW0603 - what objects compare with
    OPENING, OPEN = OPENING[:1] + OPENING[1:], OPEN[:1] + OPEN[1:]
    RELEASING = RELEASING[:1] + RELEASING[1:]  # no child waits for a parent's thread
    _PID = os.getpid()


if sys.platform != "win32":
    os.register_at_fork(after_in_child=_forked)


def close_copy(file: object) -> None:
    """Close this process's copy of *file*'s descriptor, without flushing it.

    For a file object (``open()``, ``makefile()``, a ``Popen`` pipe) that a
    process forked inside a block inherited.  What a buffered file still holds
    was written before the fork, by the process that opened it, which writes it
    itself: flushed in the child too, it would be written twice.  So the file
    under the buffers is closed: the buffers then count as closed and neither
    flush nor close again.  Safe to call again.
    """
    raw = getattr(file, "buffer", file)  # a text file's binary buffer
    raw = getattr(raw, "raw", raw)  # a buffered file's raw file
    close = getattr(raw, "close", None)
    if close is not None:
        close()


def record_call(record: list[T], function: Callable[..., T], *args: object) -> T:
    """Call ``function(*args)`` and append the result to *record*; return it.

    The call and the append happen inside C code when *function* is a C function
    (``Lock.acquire``, ``os.open``, or a ``functools.partial`` of one): no signal
    check lies between them, so a ``KeyboardInterrupt`` cannot drop the result of
    a call that succeeded.
    """
    record.extend(itertools.starmap(function, (args,)))
    return record[-1]


def close_recorded(record: list[int], count: int | None = None) -> None:
    """Close and forget the last *count* descriptors of *record* (default: all).

    ``list.pop`` hands each to ``os.close`` inside C code: no interrupt can land
    between the two and lose one, or leave one listed once closed.  One can land
    between two of them, or before the first: what is left stays listed.
    """
    pops = itertools.repeat(record, len(record) if count is None else count)
    collections.deque(map(os.close, map(list.pop, pops)), maxlen=0)


_SIGINT = signal.SIGINT
WAIT_SLICE = 0.02
"""Seconds: a wait with interrupts deferred goes in slices this long, so that a
``KeyboardInterrupt`` comes out between two slices, at most this late."""


class InterruptDeferral:
    """Holds back, for the length of a ``with`` block, every signal's Python handler.

    Python raises ``KeyboardInterrupt`` from its ``SIGINT`` handler, which runs in
    the main thread at the next point where the interpreter checks for signals;
    any other signal given a Python handler (``signal.signal``) is handled at the
    same points, and its handler may raise too: a server's ``SIGTERM`` handler
    raising ``SystemExit``, a ``SIGALRM`` timer raising its own exception.
    ``with deferred_interrupts():`` (the one instance) makes the steps of its block
    one step for all of them: in the main thread it puts, in place of every
    Python handler, one that only notes the signal, and at the end of the block
    it puts the handlers back and calls the first noted signal's (the last frame
    noted is its argument); the other signals noted are sent again, and Python
    runs their handlers at its next check, as it runs signals that arrive
    together.  What a handler raises (or does: asyncio's cancels the main task)
    comes out of the ``with`` statement, once the block has recorded what it
    acquired.  Signals whose handler is the default or ignored are left alone:
    no Python code runs for them.

    Blocks nest: only the outermost swaps handlers.  In another thread, or while
    no signal has a Python handler, a block does nothing, since no handler can
    raise there.  A handler put in place during a block is replaced when it
    ends.  A block costs about 2.5 us in the main thread (finding the Python
    handlers among the 60-odd signals is most of it), so it holds only the steps
    that need it, and never a long wait, which would hold Ctrl-C back as long:
    a wait runs in slices of ``WAIT_SLICE`` seconds, each in a block of its own.
    """

    __slots__ = ("_depth", "_handler", "_main", "_noted", "_previous")

    def __init__(self) -> None:
        self._depth = 0
        self._main = threading.main_thread().ident
        self._noted: list[tuple[int, FrameType | None]] = []
        self._previous: dict[int, Handler] | None = None
        self._handler: Handler = self._note  # one object, for deferring()

    def _note(self, signum: int, frame: FrameType | None) -> None:
        self._noted.append((signum, frame))

    def __enter__(self) -> None:
        if threading.get_ident() != self._main:
            return
        if self._depth == 0:
            self._noted.clear()  # left by a signal raised as the last block ended
            try:
                # A signal landing between the swap and this store meets _note.
                self._previous = replace_python_handlers(self._handler) or None
            except ValueError:  # a subinterpreter: signals are not its business
                self._main = None
        self._depth += 1

    def __exit__(self, *exc_info: object) -> None:
        if threading.get_ident() != self._main:
            return
        self._depth -= 1
        previous = self._previous
        if self._depth or previous is None:
            return
        self._previous = None
        put_back_handlers(previous)
        if self._noted:
            first, *others = self._noted_signals()
            try:
                previous[first](first, self._take_noted())
            finally:
                raise_signals(others)

    def _noted_signals(self) -> dict[int, None]:
        """The signals noted, each once, in the order they first arrived."""
        return dict.fromkeys(signum for signum, _ in self._noted)

    def _take_noted(self) -> FrameType | None:
        """The frame of the last signal noted; forget them all.

        No variable of ``__exit__`` may hold that frame: when the signal landed
        in ``__exit__`` itself, its own frame would refer to itself, and keep
        every frame below it alive until a garbage collection.
        """
        noted, self._noted = self._noted, []
        _, frame = noted[-1]
        return frame

    def deferring(self) -> bool:
        """Whether a ``SIGINT`` arriving now would be held back (for test tools)."""
        return (
            threading.get_ident() == self._main
            and _get_handler(_SIGINT) is self._handler
        )

    def _after_fork(self) -> None:
        """Start afresh in a child process; put back a handler a block replaced.

        The thread that forked is the child's main thread, and a block that was
        open in the parent's main thread will never end in the child.
        """
        previous, self._previous = self._previous, None
        if previous is not None:
            put_back_handlers(previous)
        self._depth = 0
        self._main = threading.get_ident()


@functools.cache
def deferred_interrupts() -> InterruptDeferral:
    """Return the process's one ``InterruptDeferral``, made at the first call."""
    deferral = InterruptDeferral()
    if sys.platform != "win32":
        os.register_at_fork(after_in_child=deferral._after_fork)
    return deferral


_JOINS_ON_TSTATE_LOCK = sys.version_info < (3, 13)
"""Whether ``join_thread`` waits on a thread's private ``_tstate_lock``: only
where ``Thread.join()`` has the bpo-45274 handling that an interrupt breaks."""


def join_thread(thread: threading.Thread) -> None:
    """Wait until *thread* has ended (at once if it never started).

    As ``Thread.join()`` does, it raises ``RuntimeError`` when *thread* is the
    calling thread, which would wait for ever.  A ``KeyboardInterrupt`` stops the
    wait, and only the wait.  On Python 3.11 and 3.12 one raised inside
    ``Thread.join()`` or ``Thread.is_alive()`` while the thread runs makes
    ``threading`` release the thread's own lock and mark it stopped (the bpo-45274
    handling in ``_wait_for_tstate_lock``), after which every ``join()`` returns
    at once; a second one inside that handling leaves the lock held for ever.
    There neither is called while the thread may run: the wait is for that lock
    itself (``_tstate_lock``, private, which the thread holds until its end),
    taken and given back by ``_wait_until_free``, and ``threading`` marks the
    thread stopped the next time it is asked.
    """
    if thread is threading.current_thread():
        raise RuntimeError("cannot join current thread")
    # None once stopped; from 3.13 the handling above is gone and join() is safe.
    lock = getattr(thread, "_tstate_lock", None) if _JOINS_ON_TSTATE_LOCK else None
    if lock is not None:
        _wait_until_free(lock)
    elif thread.is_alive():
        thread.join()


def _wait_until_free(lock: threading.Lock) -> None:
    """Wait until *lock* is free: take it and give it back at once.

    ``compress`` hands the success of ``acquire()`` to ``starmap``, which calls
    ``release()``, inside C code: no bytecode, trace event or check for signals
    lies between the two calls, so an interrupt stops the wait with the lock
    untaken, or comes once it is given back.
    """
    taken = itertools.compress(((),), map(lock.acquire, (True,)))
    any(itertools.starmap(lock.release, taken))


class Lifecycle:
    """The lifecycle that ``Resource`` and ``AsyncResource`` share, written once.

    ``contextlib``'s ``_BaseExitStack`` plays this part for ``ExitStack`` and
    ``AsyncExitStack``: what does not await lives here, once.  The state
    (``NEW``, ``OPENING``, ``OPEN``, ``CLOSED``), ``closed``, ``_require`` and
    its errors, the ownership of a copy in a forked child (``_acquired_elsewhere``,
    ``_disown``, ``_release_copy``), the collection finalizer and its
    ``ResourceWarning``, and the tracking that ``live_resources`` reads.  A base
    class built on it supplies the entry and exit (``with`` or ``async with``)
    and ``_release_at_collection``; a resource class calls its base's
    ``__init__`` by name (``Resource.__init__(self)``) as its first statement.
    """

    __slots__ = ("_state",)

    def __init__(self) -> None:
        self._state = NEW

    def _block_raised(self, exc: BaseException) -> None:
        """Called by the exit of a block that raised *exc*, before the release."""

    def _release_copy(self) -> None:
        """Release this process's copy, in a process forked inside the block.

        Called, instead of the release, by the end of the block, the close and
        the collection finalizer in a process other than the one that acquired.
        It must not touch an event loop, whose selector the two processes share.
        By default it releases nothing (see ``Resource``).
        """

    def _release_at_collection(self) -> str:
        """Release what is held, for the collection finalizer; say how, after ``:``.

        Each base class defines it; it returns ``""`` when there is nothing to add
        to the warning's ``unclosed <object>``.
        """
        msg = f"{type(self).__name__} defines no _release_at_collection()"
        raise NotImplementedError(msg)

    def __del__(self, _warn: Callable[..., None] = warnings.warn) -> None:
        try:
            state = self._state
        except AttributeError:  # __init__ failed before the base's __init__ ran
            return
        if state in HELD:
            if self._acquired_elsewhere():  # a copy in a forked child: no leak
                self._disown(None)
                return
            message = f"unclosed {self!r}"  # named as it was while held
            try:
                message += self._release_at_collection()
            finally:  # released first: with warnings as errors the warning raises
                _warn(message, ResourceWarning, stacklevel=2, source=self)

    @property
    def closed(self) -> bool:
        """Whether the resource has been released."""
        return self._state == CLOSED

    def _require(self, value: V | None) -> V:
        """Return *value*, a piece of the resource, or raise if it is not held."""
        if value is None or self._state != OPEN:
            raise misuse_error(self, self._state)
        return value

    def _held_here(self, primary: BaseException | None) -> bool:
        """Whether this process holds the resource, to release it now.

        A copy in a process forked inside the block is closed here instead
        (``_disown``, with *primary* the block's exception), and is not held.
        """
        if self._state not in HELD:
            return False
        if self._acquired_elsewhere():
            self._disown(primary)
            return False
        return True

    def _acquired_elsewhere(self) -> bool:
        """Whether another process acquired what this object holds.

        True in a forked child, for a copy whose state is its parent's ``OPEN``
        or ``OPENING`` (see ``_forked``).
        """
        state = self._state
        return state in HELD and state is not OPEN and state is not OPENING

    def _disown(self, primary: BaseException | None) -> None:
        """Close the object in this process, which did not acquire: its copy only."""
        self._state = CLOSED  # never retried: the copy is this process's alone
        try:
            self._release_copy()
        except BaseException as error:  # noqa: BLE001 - raise_unless_noted raises it
            raise_unless_noted(error, self, primary)


def misuse_error(resource: object, state: str) -> ClosedResourceError:
    """The error for a use of *resource* while its lifecycle is in *state*.

    ``Lifecycle._require`` raises it, and the helpers whose lifecycle is not a
    ``Lifecycle`` (``CleanupStack``, ``ClosingWith.thing``) too: one wording.
    """
    return ClosedResourceError(f"{resource!r} {_MISUSE.get(state, 'is closed')}")


class Resource(Lifecycle, Generic[T_co]):
    """Base class of a single-use synchronous context manager.

    A subclass calls ``Resource.__init__(self)`` first in its ``__init__`` (by
    name: on Python 3.11 a ``super()`` call costs more), and implements
    two methods:

    * ``_acquire()`` acquires the resource, recording each piece on the object as
      soon as it exists, and returns what the ``with`` block gets;
    * ``_release(succeeded)`` releases whatever is recorded.  It runs once the
      block has ended (*succeeded* is true only if the block raised nothing),
      from ``close()``, from the collection finalizer, and after ``_acquire``
      failed half-way; it runs again if an interrupt stopped it.

    It may also implement ``_block_raised(exc)``, which the exit of a block that
    raised *exc* calls before the release, and ``_collecting()``, which the
    collection finalizer calls before it releases (by default they do nothing).

    A process forked inside the block has a copy of the object, and of what it
    holds.  There the block's end, ``close()`` and collection call
    ``_release_copy()`` instead, with no warning, and the object is closed in
    that process only.  By default it releases nothing: what was acquired belongs
    to the process that acquired it, which releases it when its own block ends.
    A subclass overrides it to release what is the child's own copy, such as a
    descriptor (``close_copy``); nothing that another process would notice.

    The base class provides the rest (most of it ``Lifecycle``'s): ``with``
    acquires and releases; a second ``with`` raises ``ReentryError``; ``close()``
    releases early and may be called any number of times (before entry it does
    nothing); ``closed`` tells whether the resource was released;
    ``_require(value)`` raises ``ClosedResourceError`` unless the resource is
    held.  If ``_release`` raises while the block raised, the block's exception
    propagates with the failure attached as a note.  An object collected while
    it holds its resource releases it and emits a ``ResourceWarning``.
    """

    __slots__ = ()

    def _acquire(self) -> T_co:
        """Acquire the resource: the subclass's part (see the class docstring)."""
        msg = f"{type(self).__name__} defines no _acquire()"
        raise NotImplementedError(msg)

    def _release(self, *, succeeded: bool) -> None:
        """Release what is recorded: the subclass's part (see the class docstring)."""
        msg = f"{type(self).__name__} defines no _release()"
        raise NotImplementedError(msg)

    def _collecting(self) -> None:
        """Called by the collection finalizer, before it releases."""

    def __enter__(self) -> T_co:
        if self._state is not NEW:
            raise ReentryError(self)
        self._state = OPENING  # this process's (see _forked): the record
        try:
            value = self._acquire()
        except BaseException as error:
            self._finish(error, succeeded=False)
            raise
        self._state = OPEN
        return value

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self._state is not OPEN:  # not held, not by this process, or releasing
            if self._state is RELEASING:  # another thread's close() runs the release
                self._wait_for_release(exc)
            elif self._held_here(exc):  # still acquiring
                self._finish_block(exc)
            return
        if exc is not None:
            self._block_raised(exc)
        # _finish(exc, succeeded=exc is None), inlined: the hot path
        if self._state is not OPEN:  # another thread's close() has claimed it
            self._wait_for_release(exc)
            return
        self._state = RELEASING  # the claim: see _finish
        try:
            self._release(succeeded=exc is None)
        except BaseException as error:  # noqa: BLE001 - _failed re-raises it
            self._failed(error, exc, OPEN)
        else:
            self._state = CLOSED

    def _finish_block(self, exc: BaseException | None) -> None:
        """The end of a block that ``__exit__`` left off its hot path."""
        if exc is not None:
            self._block_raised(exc)
        self._finish(exc, succeeded=exc is None)

    def _release_at_collection(self) -> str:
        self._collecting()
        _finish_in_finalizer(self)
        return ""

    def close(self) -> None:
        """Release the resource now; again, or before entry, it does nothing.

        Called while another thread releases it (the block's exit, or a
        ``close()`` there), it returns once that release has ended.
        """
        if self._held_here(None):
            self._finish(None, succeeded=False)
        elif self._state is RELEASING and not _releasing_here(self):
            self._wait_for_release(None)

    def _finish(self, primary: BaseException | None, *, succeeded: bool) -> None:
        """Run ``_release`` once, however many threads call this at the same time.

        The thread that finds the object held marks it ``RELEASING`` and runs
        ``_release``; one that finds it releasing waits until that release has
        ended (``_wait_for_release``).  The test and the mark are one step for
        the other threads: no call and no jump back lies between them, so the
        interpreter cannot switch threads there (nor raise an interrupt).  The
        same holds for ``__exit__``'s copy.  A release that an interrupt stopped
        gives the claim back, to be retried.
        """
        if self._acquired_elsewhere():  # a process forked while _acquire ran
            self._disown(primary)
            return
        claimed = self._state
        if claimed is not OPEN and claimed is not OPENING:
            self._wait_for_release(primary)
            return
        self._state = RELEASING
        try:
            self._release(succeeded=succeeded)
        except BaseException as error:  # noqa: BLE001 - _failed re-raises it
            self._failed(error, primary, claimed)
        else:
            self._state = CLOSED

    def _failed(
        self, error: BaseException, primary: BaseException | None, claimed: str
    ) -> None:
        """Raise *error*, a failed release, unless it became a note on *primary*.

        An interrupt gives the claim back (the state *claimed* before the release),
        for ``close()`` or the collection to run the release again.
        """
        self._state = CLOSED if isinstance(error, Exception) else claimed
        raise_unless_noted(error, self, primary)

    def _wait_for_release(self, primary: BaseException | None) -> None:
        """Wait until another thread's ``_release`` of this object has ended.

        Only a ``close()`` racing the block's exit gets here, so the wait polls
        rather than cost every release a notification.  If an interrupt stopped
        that release (it gave the claim back), this thread runs it again.
        """
        while self._state is RELEASING:
            time.sleep(_RACE_POLL)
        if self._state is OPEN or self._state is OPENING:
            self._finish(primary, succeeded=False)


def _releasing_here(resource: Resource[object]) -> bool:
    """Whether the calling thread runs *resource*'s release, and calls back into it.

    A ``close()`` that finds the object releasing waits for the release, unless
    it is called from within it (a callback of the release, a signal handler),
    which would wait for ever: the thread's frames tell, looked at only then.
    """
    import inspect  # noqa: PLC0415 - only a close() that meets a release needs it

    frame = inspect.currentframe()
    while frame is not None:
        if frame.f_code in _CLAIMING_CODES and frame.f_locals.get("self") is resource:
            return True
        frame = frame.f_back
    return False


_CLAIMING_CODES = frozenset((Resource.__exit__.__code__, Resource._finish.__code__))
"""The code of the two methods that claim a release and run it."""


def _finish_in_finalizer(resource: Resource[object]) -> None:
    """Release *resource*, being collected, with signals held back.

    Python drops an exception raised in a finalizer (it reports it to
    ``sys.unraisablehook``), so an interrupt there would stop the release for
    good: what it had not closed yet would be left to its own finalizers, and
    their ``ResourceWarning``.  Held back, the interrupt comes once the
    release is over, and is dropped as Python drops any finalizer's error.
    """
    with deferred_interrupts():
        resource._finish(None, succeeded=False)


_IDLE_STATES = (NEW, CLOSED, "released")
_TRACKED: dict[type, None] = {Lifecycle: None}


def tracked_resource(cls: TypeT) -> TypeT:
    """Class decorator: let ``testing`` find instances left open.

    Subclasses of ``Lifecycle`` (``Resource``, ``AsyncResource``) are tracked
    already.  Another
    class must keep its lifecycle in a ``_state`` attribute: ``"new"`` before
    acquisition, ``"closed"`` or ``"released"`` after release, anything else
    (``"open"``, ``"held"``, ...) while it holds its resource.  ``LeakCheck`` and
    ``hunt_leaks`` then report every instance created by the checked code that
    still holds its resource, even one that owns no file descriptor (a held lock,
    a pending cleanup).  Subclasses are tracked too.  The class itself is returned
    unchanged.

    Example:
        ```python
        @tracked_resource
        class Connection: ...
        ```
    """
    _TRACKED[cls] = None
    return cls


def live_resources() -> list[object]:
    """Return every live instance of a tracked class that still holds its resource.

    Walks the garbage collector's list of objects: a few milliseconds, meant for
    tests.  Objects only reachable from reference cycles are included until the
    next ``gc.collect()``.
    """
    classes: set[type] = set()
    pending = list(_TRACKED)
    while pending:
        cls = pending.pop()
        if cls not in classes:
            classes.add(cls)
            pending.extend(cls.__subclasses__())
    return [
        obj
        for obj in gc.get_objects()
        if type(obj) in classes and getattr(obj, "_state", NEW) not in _IDLE_STATES
    ]
