"""Context-manager helpers for the patterns plain ``contextlib`` gets wrong.

Each helper is a small class-based context manager with the same contract as the
package's resources: it is single-use (a second ``with`` raises ``ReentryError``),
releasing twice is harmless, and one garbage-collected while it still holds
something releases it with a ``ResourceWarning``.

Three rules hold for every helper:

* A release step always runs, on success, on an exception and on
  ``KeyboardInterrupt``: there is no ``@contextmanager`` generator whose
  ``yield`` lacks a ``try``/``finally``.
* ``__exit__`` never returns a true value of its own, so no exception is swallowed
  (``CleanupStack`` passes on the answer of a member that suppresses, as nested
  ``with`` statements would).
* A failing cleanup never hides the exception raised by the block: that exception
  propagates unchanged, and each cleanup failure is attached to it as a note
  (``BaseException.add_note``).  The one exception to the rule is an interrupt,
  an exception that is not an ``Exception`` (``KeyboardInterrupt``,
  ``SystemExit``, ``asyncio.CancelledError``), raised by a cleanup while the block
  raised an ordinary ``Exception``: the interrupt wins, with the block's exception
  as its ``__context__``.

``tracked_resource`` and ``live_resources`` let ``testing`` find
instances of the package's classes that still hold their resource.
"""

from __future__ import annotations

import _thread
import collections
import functools
import itertools
import operator
import threading
import time
import warnings
from typing import (
    TYPE_CHECKING,
    Any,
    Generic,
    ParamSpec,
    Protocol,
    TypeVar,
    cast,
    overload,
)

from . import _resource
from ._cleanup import cleanup_outcome
from ._resource import (
    CLOSED,
    NEW,
    WAIT_SLICE,
    Lifecycle,
    Resource,
    deferred_interrupts,
    live_resources,
    misuse_error,
    record_call,
    tracked_resource,
)
from .errors import ReentryError

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Coroutine
    from contextlib import AbstractContextManager
    from types import TracebackType
    from typing import Self

__all__ = [
    "AcquireRelease",
    "Acquired",
    "Acquisition",
    "CleanupStack",
    "ClosingWith",
    "ContextGroup",
    "SupportsRelease",
    "SupportsShutdown",
    "SupportsTerminate",
    "SupportsTimedAcquire",
    "enter_all",
    "live_resources",
    "record_call",
    "releasing",
    "shutting_down",
    "terminating",
    "tracked_resource",
]

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)
T1 = TypeVar("T1")
T2 = TypeVar("T2")
T3 = TypeVar("T3")
T4 = TypeVar("T4")
R = TypeVar("R")
P = ParamSpec("P")
TypeT = TypeVar("TypeT", bound=type)

# Closing through a method that is not close()


class SupportsShutdown(Protocol):
    """Anything with a ``shutdown()`` method (``ThreadPoolExecutor``, ...)."""

    def shutdown(self) -> object:
        """Release the object."""
        ...


class SupportsTerminate(Protocol):
    """Anything with a ``terminate()`` method (``multiprocessing.Pool``, ...)."""

    def terminate(self) -> object:
        """Release the object."""
        ...


class SupportsRelease(Protocol):
    """Anything with a ``release()`` method (a lock that is already held, ...)."""

    def release(self) -> object:
        """Release the object."""
        ...


ShutdownT = TypeVar("ShutdownT", bound=SupportsShutdown)
TerminateT = TypeVar("TerminateT", bound=SupportsTerminate)
ReleaseT = TypeVar("ReleaseT", bound=SupportsRelease)


class _ThingAndMethod(Lifecycle, Generic[T]):
    """What ``ClosingWith`` and its async twin share: the object and its method.

    The object is owned from creation, as ``open()`` owns its file, by the
    process that made it: the release (``close()`` or ``aclose()``) and the
    collection finalizer release one never entered as they release one held.
    """

    __slots__ = ()  # each subclass has its own: they differ in their other base

    _thing: T
    _method: str
    _creator: int
    _release_call: Callable[[], Any]

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._thing!r}, {self._method!r})"

    @property
    def thing(self) -> T:
        """The managed object; raises ``ClosedResourceError`` once it is released."""
        if self.closed:
            raise misuse_error(self, CLOSED)
        return self._thing

    def _own_unentered(self) -> None:
        """Hold the object if it was never entered, to release it as a held one."""
        if (
            getattr(self, "_state", None) == NEW
            and hasattr(self, "_release_call")
            and self._creator == _resource._PID
        ):
            self._state = _resource.OPEN

    def __del__(self, _warn: Callable[..., None] = warnings.warn) -> None:
        self._own_unentered()  # never entered, but owned: released, warned
        Lifecycle.__del__(self, _warn)


def _owned(
    thing: T, method: str, args: tuple[object, ...], kwargs: dict[str, object]
) -> tuple[T, str, int, Callable[[], Any]]:
    """*thing*, *method*, the process that owns them, and the call that releases.

    What ``_ThingAndMethod`` records; the call is *thing*'s *method* with *args*
    and *kwargs*.  Raises ``TypeError`` if *thing* has no such method.
    """
    release: object = getattr(thing, method, None)
    if not callable(release):
        raise TypeError(f"{thing!r} has no {method}() method to release it with")
    return thing, method, _resource._PID, functools.partial(release, *args, **kwargs)


class ClosingWith(_ThingAndMethod[T], Resource[T]):
    """Context manager that calls a release method of *thing* at the end of a block.

    ``contextlib.closing(thing)`` only knows ``thing.close()``; many objects are
    released by ``shutdown()``, ``terminate()``, ``release()`` or ``stop()``.

    Example:
        ```python
        with ClosingWith(ThreadPoolExecutor(), "shutdown", cancel_futures=True) as pool:
            pool.submit(work)
        ```

    Plain-contextlib equivalent: ``with contextlib.closing(...)`` cannot name the
    method, and the usual replacement, a ``@contextmanager`` generator that calls
    the method after its ``yield``, skips it when the block raises unless the
    ``yield`` sits in a ``try``/``finally``.  Here the method runs once on every way
    out, with the extra *args* and *kwargs* given; the block's exception
    propagates, with a failure of the method attached to it as a note.  The method
    is looked up when the object is created, so a misspelt name raises
    ``TypeError`` before anything runs.

    The object owns *thing* from its creation, as ``open()`` owns its file:
    ``close()`` calls the method, also before the block (which then can no longer
    be entered: ``ReentryError``), and may be called any number of times; an
    object garbage-collected before its block has ended, entered or not, calls
    the method and emits a ``ResourceWarning``.  So a ``KeyboardInterrupt`` that
    lands as the ``with`` statement starts, before ``__enter__`` has run a line,
    leaves *thing* to ``close()`` or to the collector, not to nobody, and
    ``check_resource`` passes it.  Single-use.  ``shutting_down``,
    ``terminating`` and ``releasing`` build one with the method name checked by
    the type checker.

    In a process forked inside the block, the block's end (or ``close()``, or
    collection) calls nothing: the object belongs to the process that entered,
    and its method could end what that process still uses (``terminate()`` of a
    pool whose workers are its children, ``shutdown()`` of a socket).
    """

    __slots__ = ("_creator", "_method", "_release_call", "_thing")

    def __init__(
        self, thing: T, method: str = "close", /, *args: object, **kwargs: object
    ) -> None:
        Resource.__init__(self)
        # Owned from the last store on: before it, dropping the object drops *thing*.
        self._thing, self._method, self._creator, self._release_call = _owned(
            thing, method, args, kwargs
        )

    def _acquire(self) -> T:
        return self._thing

    def _release(self, *, succeeded: bool) -> None:
        self._release_call()

    def close(self) -> None:
        """Call the release method now, before the block too; again, do nothing."""
        self._own_unentered()
        Resource.close(self)


def shutting_down(thing: ShutdownT) -> ClosingWith[ShutdownT]:
    """Return a ``ClosingWith`` calling ``thing.shutdown()`` when the block ends."""
    return ClosingWith(thing, "shutdown")


def terminating(thing: TerminateT) -> ClosingWith[TerminateT]:
    """Return a ``ClosingWith`` calling ``thing.terminate()`` when the block ends.

    ``terminate()`` only asks a child process to stop: it neither waits for it nor
    reaps it.
    """
    return ClosingWith(thing, "terminate")


def releasing(thing: ReleaseT) -> ClosingWith[ReleaseT]:
    """Return a ``ClosingWith`` calling ``thing.release()`` when the block ends."""
    return ClosingWith(thing, "release")


# Several resources, released in reverse order


class _ExitFunction(Protocol):
    """An ``__exit__`` method bound to its object, or a wrapped callback."""

    def __call__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
        /,
    ) -> object: ...


def _callback_exit(
    function: Callable[..., object], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> _ExitFunction:
    def exit_(
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        function(*args, **kwargs)

    return exit_


def _exit_arguments(
    exc: BaseException | None,
) -> tuple[type[BaseException] | None, BaseException | None, TracebackType | None]:
    if exc is None:
        return None, None, None
    return type(exc), exc, exc.__traceback__


_call: Callable[[Callable[[], object]], object] = operator.call


def _call_in_turn(*calls: Callable[[], object]) -> None:
    """Make *calls* in turn from C: no signal check lies between two of them.

    ``map`` makes the calls and ``deque(..., maxlen=0)`` drains it without
    running bytecode; a call that raises stops the rest.
    """
    collections.deque(map(_call, calls), maxlen=0)


def _type_attribute(cls: type, name: str) -> object:
    """The attribute *name* of the first class in *cls*'s MRO that defines it.

    The lookup ``with`` makes (``_PyType_Lookup``): no metaclass, no binding.
    Raises ``AttributeError`` if no class defines *name*.
    """
    for owner in cls.__mro__:
        attributes = vars(owner)
        if name in attributes:
            return attributes[name]
    raise AttributeError(name)


def _bound(attribute: object, manager: object) -> Callable[..., Any]:
    """*attribute*, a special method found on *manager*'s type, bound as ``with`` does.

    Its type's ``__get__``, if any, binds it: a function comes as a bound method,
    and a property as what it returns, such as a C function that runs with no
    Python code between it and the stack (``getattr(type(manager), name)`` would
    give the property itself).
    """
    try:
        bind = cast("Callable[..., Any]", _type_attribute(type(attribute), "__get__"))
    except AttributeError:
        return cast("Callable[..., Any]", attribute)
    return cast("Callable[..., Any]", bind(attribute, manager, type(manager)))


class _CleanupStackBase:
    """What ``CleanupStack`` and ``AsyncCleanupStack`` share.

    ``contextlib``'s ``_BaseExitStack`` plays this part for ``ExitStack``.  Each
    cleanup is kept as (what is cleaned up, its exit function, whether that
    returns an awaitable, the process that registered it): in a process forked
    with the stack open, only the cleanups registered there run, and the others,
    the parent's, are dropped.  ``_aunwind`` is one coroutine for both: the synchronous
    stack holds no awaitable cleanup, so its ``_aunwind`` never suspends and runs to
    its end in one ``send`` (``_run_without_awaiting``).
    """

    __slots__ = ("_cleanups", "_phase")

    def __init__(self) -> None:
        self._cleanups: list[tuple[object, _ExitFunction, bool, int]] = []
        self._phase = NEW  # Lifecycle's states: NEW, then OPEN, then CLOSED

    def __repr__(self) -> str:
        return f"<{type(self).__name__} with {len(self._cleanups)} pending cleanup(s)>"

    @property
    def _state(self) -> str:
        """What ``live_resources`` reads: held only while cleanups are pending."""
        return _resource.OPEN if self._cleanups else CLOSED

    def __del__(self, _warn: Callable[..., None] = warnings.warn) -> None:
        cleanups = getattr(self, "_cleanups", None)
        if cleanups:  # those of the process that forked this one are not its own
            cleanups = [cleanup for cleanup in cleanups if cleanup[3] == _resource._PID]
        if not cleanups:
            return
        message = f"unclosed {self!r}"
        self._cleanups = [cleanup for cleanup in cleanups if not cleanup[2]]
        try:
            self._unwind_now(None)
        finally:  # the cleanups first: with warnings as errors the warning raises
            _warn(message, ResourceWarning, stacklevel=2, source=self)

    def __len__(self) -> int:
        return len(self._cleanups)

    def enter(self, manager: AbstractContextManager[T]) -> T:
        """Enter *manager* and register its ``__exit__``; return what it gives.

        If entering raises, nothing is registered and the exception propagates.
        Raises ``TypeError`` if *manager* is not a context manager.
        """
        kind = "a context manager"
        enter, exit_ = self._entry(manager, kind, "__enter__", "__exit__")
        # Registered as soon as __enter__ returns: no interrupt falls between.
        entered: list[T] = []
        _call_in_turn(
            functools.partial(entered.extend, itertools.starmap(enter, ((),))),
            functools.partial(
                self._cleanups.append, (manager, exit_, False, _resource._PID)
            ),
        )
        return entered[0]

    def _entry(
        self, manager: object, kind: str, enter: str, exit_: str
    ) -> tuple[Callable[[], Any], _ExitFunction]:
        """*manager*'s *enter* and *exit_* methods, found as ``with`` finds them.

        Raises ``ClosedResourceError`` if the stack is closed, and ``TypeError``
        (saying *manager* is not *kind*) if it lacks either method.
        """
        self._check_open()
        cls = type(manager)
        try:
            methods = _type_attribute(cls, enter), _type_attribute(cls, exit_)
        except AttributeError:
            msg = f"{manager!r} is not {kind} (no {enter}/{exit_})"
            raise TypeError(msg) from None
        return _bound(methods[0], manager), _bound(methods[1], manager)

    def callback(
        self, function: Callable[P, R], /, *args: P.args, **kwargs: P.kwargs
    ) -> Callable[P, R]:
        """Register ``function(*args, **kwargs)`` as a cleanup; return *function*."""
        self._check_open()
        exit_ = _callback_exit(function, args, kwargs)
        self._cleanups.append((function, exit_, False, _resource._PID))
        return function

    def pop_all(self) -> Self:
        """Move every pending cleanup to a new stack and return it."""
        self._check_open()
        stack = type(self)()
        stack._cleanups, self._cleanups = self._cleanups, []
        return stack

    def _open(self) -> None:
        if self._phase != NEW:
            raise ReentryError(self)
        self._phase = _resource.OPEN

    def _check_open(self) -> None:
        if self._phase == CLOSED:
            raise misuse_error(self, CLOSED)

    def _unwind_now(self, exc: BaseException | None) -> bool:
        """Run the cleanups, all synchronous, to their end (``_aunwind``)."""
        unwinding = self._aunwind(exc)
        try:
            return _run_without_awaiting(unwinding)
        finally:
            unwinding.close()  # not started if an interrupt came first: no warning

    async def _aunwind(self, exc: BaseException | None) -> bool:
        self._phase = CLOSED
        primary = exc
        failures: list[tuple[object, BaseException]] = []
        while self._cleanups:
            cleanup = self._cleanups[-1]
            what, exit_, is_async, pid = cleanup
            if pid != _resource._PID:  # the process that forked this one's own
                del self._cleanups[-1]
                continue
            started: list[None] = []
            try:
                if is_async:
                    started.append(None)
                    del self._cleanups[-1]
                    suppressed = await cast(
                        "Awaitable[object]", exit_(*_exit_arguments(primary))
                    )
                else:
                    # Popped as soon as it returns: no interrupt falls between
                    # the two, as none does between a with block and __exit__.
                    results: list[object] = []
                    _call_in_turn(
                        functools.partial(started.append, None),
                        functools.partial(
                            results.extend,
                            itertools.starmap(exit_, (_exit_arguments(primary),)),
                        ),
                        self._cleanups.pop,
                    )
                    suppressed = results[0]
            except BaseException as error:  # noqa: BLE001 - reported by _outcome
                # Not started: an interrupt came first, and the loop runs it next.
                if started and self._cleanups and self._cleanups[-1] is cleanup:
                    del self._cleanups[-1]  # it ran, and raised
                if error is not primary:
                    failures.append((what, error))
            else:
                if suppressed and primary is not None:
                    primary = None
        raising = cleanup_outcome(primary, failures, group=True)
        if raising is not None:
            raise raising
        return exc is not None and primary is None


def _run_without_awaiting(unwinding: Coroutine[object, object, bool]) -> bool:
    """Run a coroutine that never suspends (``_aunwind`` of sync cleanups)."""
    try:
        unwinding.send(None)
    except StopIteration as done:
        return cast("bool", done.value)
    unwinding.close()
    msg = "a synchronous cleanup stack held an asynchronous cleanup"
    raise AssertionError(msg)


@tracked_resource
class CleanupStack(_CleanupStackBase):
    """Context manager that runs every registered cleanup, last registered first.

    Context managers entered with ``enter()`` and functions registered with
    ``callback()`` are released in reverse order when the block ends.

    Example:
        ```python
        with CleanupStack() as stack:
            source = stack.enter(ManagedFile(path))
            stack.callback(shutil.rmtree, workdir)
        ```

    Plain-contextlib equivalent: ``contextlib.ExitStack``, with two of its traps
    removed.  In an ``ExitStack`` a failing cleanup replaces the block's exception
    (which survives only as its ``__context__``) and is passed to the cleanups that
    follow as if the block had raised it.  Here every cleanup runs and sees the
    block's own exception; that exception keeps propagating, with each cleanup
    failure attached as a note.  When the block succeeded, the failures are raised
    together as one ``ExceptionGroup`` (always a group, even of one, so that
    ``except*`` handles every case alike), unless one is an interrupt such as
    ``KeyboardInterrupt``, which is raised itself.  ``ExitStack`` also runs
    nothing when it is garbage-collected; this one warns and runs its cleanups.

    If a member's ``__exit__`` suppresses the block's exception (as
    ``contextlib.suppress`` does), ``__exit__`` returns true, exactly as nested
    ``with`` statements would, and the members released after it see no exception.
    ``pop_all()`` moves the cleanups to a new stack, to keep what was acquired
    once a constructor has succeeded.  ``close()`` runs the cleanups without a
    ``with`` and may be called any number of times; registering after it raises
    ``ClosedResourceError``.  A second ``with`` raises ``ReentryError``.

    Each cleanup runs only in the process that registered it.  In a process
    forked inside the block, the block's end (or ``close()``, or collection)
    runs the cleanups registered there and drops the parent's, without a
    warning: they release what the parent still uses (a ``shutil.rmtree`` of
    its directory, the ``__exit__`` of its files).
    """

    __slots__ = ()

    def __enter__(self) -> Self:
        self._open()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> bool:
        return self._unwind_now(exc)

    def close(self) -> None:
        """Run every pending cleanup now.  Calling it again does nothing."""
        self._unwind_now(None)


class ContextGroup(Generic[T_co]):
    """Context manager that enters several context managers as one.

    Use ``enter_all(a, b, c)``, which types the tuple the block receives.

    Example:
        ```python
        with enter_all(ManagedFile(src), ManagedFile(dst, "w")) as (source, target):
            target.write(source.read())
        ```

    The managers are entered in order and released in reverse order, each exactly
    once.  If entering one fails, those already entered are released and the
    entering error propagates (with their failures attached as notes).  Release
    follows ``CleanupStack``'s rules: every member is released even if some fail,
    the block's exception stays the one that propagates, and without one the
    failures are raised together as an ``ExceptionGroup``.

    ``close()`` releases what is still held (after an interrupted exit, say) and
    may be called any number of times; ``closed`` tells whether the members were
    released.  Plain-contextlib equivalent: ``with a, b, c:`` (the block's
    exception is replaced by the first failing ``__exit__``), or an ``ExitStack``
    loop (the same, and it runs nothing when garbage-collected).  Single-use.
    In a process forked inside the block, the block's end releases no member:
    they are the parent's (``CleanupStack``'s rule).
    """

    __slots__ = ("_managers", "_stack")

    def __init__(self, *managers: AbstractContextManager[Any]) -> None:
        self._managers = managers
        self._stack: CleanupStack | None = None

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(map(repr, self._managers))})"

    def __enter__(self) -> T_co:
        if self._stack is not None:
            raise ReentryError(self)
        stack = self._stack = CleanupStack()
        values: list[object] = []
        try:
            values.extend(stack.enter(manager) for manager in self._managers)
            return cast("T_co", tuple(values))  # an interrupt here must unwind too
        except BaseException as error:
            stack._unwind_now(error)
            raise

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> bool:
        if self._stack is None:
            return False
        return self._stack._unwind_now(exc)

    @property
    def closed(self) -> bool:
        """Whether the members have been released (false before the block)."""
        stack = self._stack
        return stack is not None and stack._phase == CLOSED and not stack._cleanups

    def close(self) -> None:
        """Release the members still held; again, or before entry, it does nothing."""
        if self._stack is not None:
            self._stack.close()


@overload
def enter_all(first: AbstractContextManager[T1], /) -> ContextGroup[tuple[T1]]: ...
@overload
def enter_all(
    first: AbstractContextManager[T1], second: AbstractContextManager[T2], /
) -> ContextGroup[tuple[T1, T2]]: ...
@overload
def enter_all(
    first: AbstractContextManager[T1],
    second: AbstractContextManager[T2],
    third: AbstractContextManager[T3],
    /,
) -> ContextGroup[tuple[T1, T2, T3]]: ...
@overload
def enter_all(
    first: AbstractContextManager[T1],
    second: AbstractContextManager[T2],
    third: AbstractContextManager[T3],
    fourth: AbstractContextManager[T4],
    /,
) -> ContextGroup[tuple[T1, T2, T3, T4]]: ...
@overload
def enter_all(
    *managers: AbstractContextManager[T],
) -> ContextGroup[tuple[T, ...]]: ...
def enter_all(*managers: AbstractContextManager[Any]) -> ContextGroup[tuple[Any, ...]]:
    """Return a ``ContextGroup`` entering *managers*; the block gets their values."""
    return ContextGroup(*managers)


# Acquiring with a timeout


class SupportsTimedAcquire(Protocol):
    """A lock such as ``threading.Lock``, ``RLock``, ``Semaphore`` or ``Condition``."""

    def acquire(self, blocking: bool = ..., timeout: float = ...) -> bool:  # noqa: FBT001
        """Acquire, waiting at most *timeout* seconds; return whether it succeeded."""
        ...

    def release(self) -> None:
        """Release what ``acquire`` took."""
        ...


LockT = TypeVar("LockT", bound=SupportsTimedAcquire)

_C_LOCKS = frozenset({_thread.LockType, _thread.RLock})
"""Locks written in C: one call acquires or releases, with no window inside."""
_PROCESS_LOCAL_LOCKS = (
    _thread.LockType,
    _thread.RLock,
    threading.Semaphore,  # BoundedSemaphore too
)
"""Locks whose state lives in the memory of one process: a forked child has a
copy, which it may release without changing the parent's."""


def _process_local(lock: object) -> bool:
    """Whether *lock*'s state lives in the memory of one process.

    A ``threading.Condition`` is the lock it wraps (private ``_lock``, there
    since 2.x), a ``multiprocessing`` one perhaps.
    """
    while isinstance(lock, threading.Condition):
        lock = lock._lock  # type: ignore[attr-defined]
    return isinstance(lock, _PROCESS_LOCAL_LOCKS)


_TIMEOUT_MAX = threading.TIMEOUT_MAX
_SECONDS = frozenset({int, float})
"""Timeout types that need no more than the range check (not ``bool``, a subclass)."""


def _checked_wait(timeout: object) -> float | None:
    """*timeout*, the seconds a thread lock may be waited for, or ``None``: for ever.

    Raises ``TypeError`` for anything but an ``int`` or a ``float``, which is all
    that ``acquire()`` takes (``True`` is no number of seconds), and
    ``ValueError`` for one outside 0 to ``threading.TIMEOUT_MAX``.
    """
    if timeout is None:
        return None
    if not isinstance(timeout, (int, float)) or isinstance(timeout, bool):
        msg = f"timeout must be an int, a float or None, not {timeout!r}"
        raise TypeError(msg)
    if not 0 <= timeout <= _TIMEOUT_MAX:
        msg = f"timeout must be a number of seconds >= 0 or None, not {timeout!r}"
        raise ValueError(msg)
    return timeout


class _TimedAcquisition(Resource[T_co], Generic[LockT, T_co]):
    """Acquires a lock within a timeout and releases it once.

    What the block gets is the subclass's choice: its ``_acquire`` calls
    ``_take_lock``, which returns the object itself, and returns what the block
    gets.
    """

    __slots__ = ("_c_call", "_held", "_lock", "_name", "_timeout")

    def __init__(
        self, lock: LockT, *, timeout: float | None, name: str | None = None
    ) -> None:
        Resource.__init__(self)
        if type(lock) in _C_LOCKS:
            # The arguments of the one C call that acquires it (-1: for ever).
            wait = -1 if timeout is None else timeout
            self._c_call: tuple[tuple[bool, float]] | None = ((True, wait),)
        else:
            acquire = getattr(lock, "acquire", None)
            if not (callable(acquire) and callable(getattr(lock, "release", None))):
                msg = f"lock must have acquire() and release() methods, not {lock!r}"
                raise TypeError(msg)
            self._c_call = None
        if timeout is not None and (
            type(timeout) not in _SECONDS or not 0 <= timeout <= _TIMEOUT_MAX
        ):
            _checked_wait(timeout)  # the full check, off the hot path
        self._lock = lock
        self._timeout = timeout
        self._name = name
        self._held: list[bool] = []

    @property
    def held(self) -> bool:
        """Whether this object holds the lock now."""
        return any(self._held)

    def _take_lock(self) -> Self:
        """Acquire the lock, or raise ``TimeoutError``; return this object."""
        if self._c_call is None:
            self._take_in_slices()
        else:  # record_call(self._held, self._lock.acquire, ...), inlined: hot path
            self._held.extend(itertools.starmap(self._lock.acquire, self._c_call))
        if not self._held[0]:
            raise self._timed_out()
        return self

    def _take_in_slices(self) -> None:
        """Acquire a lock written in Python, with interrupts deferred.

        A ``KeyboardInterrupt`` inside its ``acquire`` could leave it broken (a
        ``threading.Semaphore``'s inner lock held for ever, or its count off by
        one), so each try runs in a block of ``deferred_interrupts()``, and a wait
        goes in slices of ``WAIT_SLICE`` seconds: Ctrl-C is raised between two.
        """
        with deferred_interrupts():
            if self._lock.acquire(False):  # noqa: FBT003 - as threading calls it
                self._held.append(True)
                return
        deadline = None if self._timeout is None else time.monotonic() + self._timeout
        wait = WAIT_SLICE
        while deadline is None or (wait := deadline - time.monotonic()) > 0:
            with deferred_interrupts():
                if self._lock.acquire(True, min(wait, WAIT_SLICE)):  # noqa: FBT003
                    self._held.append(True)
                    return
        self._held.append(False)

    def _timed_out(self) -> TimeoutError:
        return TimeoutError(f"{self!r}: not acquired within {self._timeout} s")

    def _release_copy(self) -> None:
        """Release the child's copy of a ``threading`` lock; forget any other.

        A ``threading`` lock, semaphore or condition is memory of one process:
        in a child forked inside the block, releasing the child's copy frees it
        for the child's threads and changes nothing for the parent.  Another
        lock (a ``multiprocessing`` one, in memory shared between processes, or
        a file lock) stays as it is: its release would be the parent's.
        """
        if _process_local(self._lock):
            self._release(succeeded=False)
        else:
            self._held = []

    def _release(self, *, succeeded: bool) -> None:
        if self._c_call is not None:
            held, self._held = self._held, []
            if held and held[0]:
                self._lock.release()
            return
        with deferred_interrupts():  # before the lock is forgotten
            held, self._held = self._held, []
            if held and held[0]:
                self._lock.release()


class Acquired(_TimedAcquisition[LockT, LockT]):
    """Context manager that acquires *lock* within *timeout* seconds, or raises.

    Example:
        ```python
        with Acquired(cache_lock, timeout=2.0):
            cache.update(entries)
        ```

    ``TimeoutError`` is raised, and the block does not run, if the lock is not
    acquired in time; ``timeout=None`` waits for ever, and a negative *timeout*
    raises ``ValueError``.  *name*, if given, stands for the lock in messages.  The
    lock is released once on every way out of the block.

    Plain-contextlib equivalent: ``with lock:`` cannot take a timeout, and the
    hand-written ``if lock.acquire(timeout=...): try: ... finally: lock.release()``
    is easy to get subtly wrong (releasing a lock that was never acquired, or
    forgetting the ``finally``).  Single-use; garbage-collected while held, it
    releases the lock and emits a ``ResourceWarning``.  In a process forked
    inside the block, the block's end releases the child's copy of a
    ``threading`` lock, semaphore or condition (each process has its own), and
    leaves any other lock (a ``multiprocessing`` one, which the processes share)
    held, by the parent.
    """

    __slots__ = ()

    def __repr__(self) -> str:
        lock = self._lock if self._name is None else self._name
        return f"{type(self).__name__}({lock!r}, timeout={self._timeout!r})"

    def release(self) -> None:
        """Release the lock now.  Calling it again, or before entry, does nothing."""
        self.close()

    def _acquire(self) -> LockT:
        self._take_lock()
        return self._lock


# A pair of functions turned into a context manager


class Acquisition(Resource[T]):
    """Context manager that calls *acquire* on entry and *release* on its result.

    Usually made by an ``AcquireRelease``: ``AcquireRelease(os.open, os.close)(path,
    os.O_RDONLY)``.  ``acquire()`` runs when the block starts; if it raises,
    nothing was acquired and nothing is released.  ``release(value)`` runs once on
    every way out of the block.  ``close()`` releases early and may be called any
    number of times; ``value`` raises ``ClosedResourceError`` outside the block.
    Single-use; garbage-collected while entered, it releases the value and emits a
    ``ResourceWarning``.  In a process forked inside the block, *release* is not
    called: the value belongs to the process that acquired it.
    """

    __slots__ = ("_acquire_function", "_held", "_release_function")

    def __init__(
        self, acquire: Callable[[], T], release: Callable[[T], object]
    ) -> None:
        Resource.__init__(self)
        self._acquire_function = acquire
        self._release_function = release
        self._held: list[T] = []

    def __repr__(self) -> str:
        acquire, release = self._acquire_function, self._release_function
        return f"{type(self).__name__}({_name(acquire)}, {_name(release)})"

    @property
    def value(self) -> T:
        """What ``acquire()`` returned; ``ClosedResourceError`` outside the block."""
        return self._require(self._held or None)[0]

    def _acquire(self) -> T:
        return record_call(self._held, self._acquire_function)

    def _release(self, *, succeeded: bool) -> None:
        held, self._held = self._held, []
        if held:
            self._release_function(held[0])


class AcquireRelease(Generic[P, T]):
    """A reusable, typed context-manager class made of two functions.

    Calling it with *acquire*'s arguments returns a fresh single-use
    ``Acquisition``.

    Example:
        ```python
        raw_file = AcquireRelease(os.open, os.close)

        with raw_file("data.bin", os.O_RDONLY) as fd:
            header = os.read(fd, 16)
        ```

    The arguments are checked against *acquire*'s signature, and the block gets
    *acquire*'s return type.  Nothing runs until the ``with`` starts.

    Plain-contextlib equivalent: a ``@contextmanager`` generator ``value =
    acquire(...); yield value; release(value)``, which skips the release when the
    block raises unless the ``yield`` is wrapped in ``try``/``finally``, swallows
    the block's exception if the generator catches it without re-raising, costs a
    generator per use, and fails with an unhelpful ``RuntimeError`` when entered
    twice.  The class has none of these traps.
    """

    __slots__ = ("_acquire", "_release")

    def __init__(self, acquire: Callable[P, T], release: Callable[[T], object]) -> None:
        self._acquire = acquire
        self._release = release

    def __repr__(self) -> str:
        return f"{type(self).__name__}({_name(self._acquire)}, {_name(self._release)})"

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> Acquisition[T]:
        """Return a new ``Acquisition`` that calls ``acquire(*args, **kwargs)``."""
        return Acquisition(
            functools.partial(self._acquire, *args, **kwargs), self._release
        )


def _name(function: Callable[..., object]) -> str:
    if isinstance(function, functools.partial):
        return _name(function.func)
    name = getattr(function, "__qualname__", None)
    return name if isinstance(name, str) else repr(function)
