"""The helpers release everything, and never hide the block's own exception."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import gc
import inspect
import os
import signal
import socket
import sys
import threading
import time
import types
import warnings
import weakref
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

import pytest
from _runtime import children
from _runtime._async_resource import AsyncResource, run_in_thread
from _runtime._resource import (
    Resource,
    deferred_interrupts,
    join_thread,
)
from _runtime.async_helpers import AsyncCleanupStack, AsyncClosingWith
from _runtime.errors import ClosedResourceError, ReentryError
from _runtime.helpers import (
    Acquired,
    AcquireRelease,
    Acquisition,
    CleanupStack,
    ClosingWith,
    SupportsTimedAcquire,
    _run_without_awaiting,
    enter_all,
    releasing,
    shutting_down,
    terminating,
)
from _runtime.testing import (
    LeakCheck,
    LeakError,
    check_resource,
    run_with_fd_limit,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from pathlib import Path
    from types import CodeType, FrameType, TracebackType


class BodyError(Exception):
    """Raised inside a ``with`` block by the tests."""


class CleanupError(Exception):
    """Raised by a cleanup step by the tests."""


class Recorder:
    """Records the calls of its release methods; raises *error* from them if given."""

    def __init__(self, error: BaseException | None = None) -> None:
        self.calls: list[str] = []
        self.error = error

    def __repr__(self) -> str:
        return "Recorder()"

    def close(self) -> None:
        self._record("close")

    def shutdown(self, *, wait: bool = True) -> None:
        self._record(f"shutdown(wait={wait})")

    def terminate(self) -> None:
        self._record("terminate")

    def release(self) -> None:
        self._record("release")

    def _record(self, call: str) -> None:
        self.calls.append(call)
        if self.error is not None:
            raise self.error


class Member:
    """A context manager that logs what its ``__exit__`` saw; can fail or suppress."""

    def __init__(
        self,
        name: str,
        log: list[str],
        *,
        fail_enter: BaseException | None = None,
        fail_exit: BaseException | None = None,
        suppress: bool = False,
    ) -> None:
        self.name = name
        self.log = log
        self.fail_enter = fail_enter
        self.fail_exit = fail_exit
        self.suppress = suppress

    def __repr__(self) -> str:
        return f"Member({self.name!r})"

    def __enter__(self) -> str:
        if self.fail_enter is not None:
            raise self.fail_enter
        self.log.append(f"enter {self.name}")
        return self.name

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> bool:
        self.log.append(f"exit {self.name} saw {type(exc).__name__ if exc else None}")
        if self.fail_exit is not None:
            raise self.fail_exit
        return self.suppress


class Reraiser:
    """A context manager whose ``__exit__`` re-raises the exception it is given."""

    def __enter__(self) -> None:
        return None

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if exc is not None:
            raise exc


def notes(error: BaseException) -> list[str]:
    return list(getattr(error, "__notes__", []))


# ClosingWith


def test_closing_with_calls_the_named_method_once() -> None:
    thing = Recorder()
    with ClosingWith(thing, "shutdown", wait=False) as entered:
        assert entered is thing
        assert thing.calls == []
    assert thing.calls == ["shutdown(wait=False)"]


@pytest.mark.parametrize("error", [BodyError, KeyboardInterrupt])
def test_closing_with_releases_and_propagates(error: type[BaseException]) -> None:
    thing = Recorder()
    closing = ClosingWith(thing, "terminate")
    with pytest.raises(error), closing:
        raise error
    assert thing.calls == ["terminate"]
    assert closing.closed


def test_closing_with_release_error_propagates_alone() -> None:
    thing = Recorder(CleanupError("release failed"))
    with pytest.raises(CleanupError, match="release failed"), ClosingWith(thing):
        pass
    assert thing.calls == ["close"]


def test_closing_with_release_error_is_a_note_on_the_body_error() -> None:
    thing = Recorder(CleanupError("release failed"))
    closing = ClosingWith(thing, "release")
    with pytest.raises(BodyError) as caught, closing:
        raise BodyError
    assert notes(caught.value) == [
        "while cleaning up ClosingWith(Recorder(), 'release'), "
        "this also failed: CleanupError: release failed"
    ]
    assert thing.calls == ["release"]
    assert closing.closed


def test_closing_with_interrupt_in_release_wins_over_body_error() -> None:
    thing = Recorder(KeyboardInterrupt())
    closing = ClosingWith(thing)
    with pytest.raises(KeyboardInterrupt) as caught, closing:
        raise BodyError
    assert isinstance(caught.value.__context__, BodyError)
    # An interrupted release leaves the object held: close() runs it again.
    assert not closing.closed
    thing.error = None
    closing.close()
    assert thing.calls == ["close", "close"]
    assert closing.closed


def test_closing_with_refuses_unknown_methods_before_the_block() -> None:
    with pytest.raises(TypeError, match=r"Recorder\(\) has no stop\(\) method"):
        ClosingWith(Recorder(), "stop")


def test_closing_with_close_is_idempotent_and_use_after_close_raises() -> None:
    thing = Recorder()
    closing = ClosingWith(thing)
    with closing:
        closing.close()
        closing.close()
        with pytest.raises(ClosedResourceError, match=r"ClosingWith\(Recorder\(\), "):
            _ = closing.thing
    assert thing.calls == ["close"]
    with pytest.raises(ReentryError, match="single-use"), closing:
        pass


def test_closing_with_owns_its_thing_before_the_block() -> None:
    # As open() owns its file: close() releases before the block too.
    thing = Recorder()
    closing = ClosingWith(thing, "shutdown", wait=False)
    closing.close()
    closing.close()
    assert thing.calls == ["shutdown(wait=False)"]
    assert closing.closed
    with pytest.raises(ReentryError, match="single-use"), closing:
        pass
    assert thing.calls == ["shutdown(wait=False)"]


def test_closing_with_collected_unentered_warns_and_releases() -> None:
    thing = Recorder()
    closing = ClosingWith(thing, "terminate")
    with pytest.warns(ResourceWarning, match=r"unclosed ClosingWith\(Recorder\(\)"):
        del closing
        gc.collect()
    assert thing.calls == ["terminate"]


def test_closing_with_refused_method_leaves_its_thing_alone() -> None:
    thing = Recorder()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(TypeError):
            ClosingWith(thing, "stop")
        gc.collect()
    assert thing.calls == []


def test_closing_with_interrupted_as_the_block_starts_releases_on_close() -> None:
    # The interrupt lands on the first line of __enter__: close() releases.
    with LeakCheck():
        closing = ClosingWith(socket.socket())
        interrupted = _interrupted_at_start("__enter__")
        with pytest.raises(KeyboardInterrupt), interrupted, closing:
            pytest.fail("the body must not run")
        closing.close()
        assert closing.closed


@contextlib.contextmanager
def _interrupted_at_start(name: str) -> Iterator[None]:
    """Raise ``KeyboardInterrupt`` as the first function called *name* starts."""
    fired: list[bool] = []

    def tracer(frame: FrameType, event: str, arg: object) -> None:
        if event == "call" and frame.f_code.co_name == name and not fired:
            fired.append(True)
            raise KeyboardInterrupt

    previous = sys.gettrace()
    sys.settrace(tracer)
    try:
        yield
    finally:
        sys.settrace(previous)
    assert fired


@pytest.mark.parametrize("kind", [socket.AF_INET, socket.AF_UNIX])
def test_closing_with_keeps_the_contract(kind: socket.AddressFamily) -> None:
    report = check_resource(lambda: ClosingWith(socket.socket(kind)))
    assert report.interrupts > 0
    assert report.failed_calls > 0


def test_closing_with_collected_open_warns_and_releases() -> None:
    thing = Recorder()
    closing = ClosingWith(thing, "shutdown")
    closing.__enter__()
    with pytest.warns(ResourceWarning, match=r"unclosed ClosingWith\(Recorder\(\)"):
        del closing
        gc.collect()
    assert thing.calls == ["shutdown(wait=True)"]


def test_typed_shortcuts_call_their_methods() -> None:
    lock = threading.Lock()
    lock.acquire()
    with LeakCheck(settle=0):
        with shutting_down(ThreadPoolExecutor(1)) as pool:
            assert pool.submit(sum, [1, 2]).result() == 3
        with pytest.raises(RuntimeError, match="after shutdown"):
            pool.submit(sum, [])
    with releasing(lock):
        assert lock.locked()
    assert not lock.locked()
    thing = Recorder()
    with terminating(thing):
        pass
    assert thing.calls == ["terminate"]


# CleanupStack


class Unfinished(Resource[None]):
    """A subclass of the core that writes neither of its two methods."""

    __slots__ = ()


def test_a_resource_without_its_methods_names_what_it_lacks() -> None:
    lacking = "Unfinished defines no _acquire"
    with pytest.raises(NotImplementedError, match=lacking) as raised, Unfinished():
        pass
    [note] = raised.value.__notes__  # the release after the failed acquisition
    assert "Unfinished defines no _release()" in note


class AsyncUnfinished(AsyncResource[None]):
    """An async subclass of the core that writes only its collection release."""

    __slots__ = ()

    def _release_now(self) -> bool:
        return False


def test_an_async_resource_without_its_methods_names_what_it_lacks() -> None:
    async def main() -> None:
        async with AsyncUnfinished():
            pass

    lacking = "AsyncUnfinished defines no _acquire"
    with pytest.raises(NotImplementedError, match=lacking):
        asyncio.run(main())


@types.coroutine
def _suspend() -> Iterator[None]:
    yield


def test_a_sync_unwinding_that_would_suspend_is_closed_at_once() -> None:
    """The guard of the sync stack's one-step unwinding leaves no coroutine pending."""
    finished: list[str] = []

    async def suspends() -> bool:
        try:
            await _suspend()
        finally:
            finished.append("closed")
        return True

    unwinding = suspends()
    with pytest.raises(AssertionError, match="held an asynchronous cleanup"):
        _run_without_awaiting(unwinding)
    assert finished == ["closed"]
    assert inspect.getcoroutinestate(unwinding) == inspect.CORO_CLOSED


def test_cleanup_stack_releases_in_reverse_order() -> None:
    log: list[str] = []
    with CleanupStack() as stack:
        assert stack.enter(Member("a", log)) == "a"
        stack.callback(log.append, "callback b")
        stack.enter(Member("c", log))
        assert len(stack) == 3
    assert log == [
        "enter a",
        "enter c",
        "exit c saw None",
        "callback b",
        "exit a saw None",
    ]
    assert len(stack) == 0


def test_cleanup_stack_runs_every_cleanup_and_groups_the_failures() -> None:
    log: list[str] = []
    first, second = CleanupError("first"), CleanupError("second")
    with pytest.raises(ExceptionGroup) as caught, CleanupStack() as stack:
        stack.enter(Member("a", log, fail_exit=second))
        stack.enter(Member("b", log))
        stack.enter(Member("c", log, fail_exit=first))
    assert caught.value.exceptions == (first, second)
    assert str(caught.value) == "2 cleanups failed (2 sub-exceptions)"
    assert log[-3:] == ["exit c saw None", "exit b saw None", "exit a saw None"]


def test_cleanup_stack_single_failure_is_still_a_group() -> None:
    stack = CleanupStack()
    stack.callback(Recorder(CleanupError("only")).close)
    with pytest.raises(ExceptionGroup, match="1 cleanup failed") as caught:
        stack.close()
    assert caught.group_contains(CleanupError, match="only")


def test_cleanup_stack_keeps_the_body_error_and_notes_the_failures() -> None:
    log: list[str] = []
    with pytest.raises(BodyError) as caught, CleanupStack() as stack:
        stack.enter(Member("a", log))
        stack.enter(Member("b", log, fail_exit=CleanupError("b failed")))
        stack.enter(Member("c", log))
        raise BodyError
    assert log[-3:] == [
        "exit c saw BodyError",
        "exit b saw BodyError",
        "exit a saw BodyError",
    ]
    assert notes(caught.value) == [
        "while cleaning up Member('b'), this also failed: CleanupError: b failed"
    ]


def test_cleanup_stack_member_may_suppress_like_nested_with() -> None:
    log: list[str] = []
    with CleanupStack() as stack:
        stack.enter(Member("outer", log))
        stack.enter(contextlib.suppress(BodyError))
        raise BodyError
    assert log[-1] == "exit outer saw None"


def test_cleanup_stack_interrupt_in_cleanup_is_raised_itself() -> None:
    log: list[str] = []
    with pytest.raises(KeyboardInterrupt) as caught, CleanupStack() as stack:
        stack.enter(Member("a", log, fail_exit=CleanupError("a failed")))
        stack.enter(Member("b", log, fail_exit=KeyboardInterrupt()))
    assert log[-1] == "exit a saw None"
    assert notes(caught.value) == [
        "while cleaning up Member('a'), this also failed: CleanupError: a failed"
    ]


def test_cleanup_stack_interrupt_in_cleanup_wins_over_body_error() -> None:
    with pytest.raises(KeyboardInterrupt) as caught, CleanupStack() as stack:
        stack.callback(Recorder(KeyboardInterrupt()).close)
        raise BodyError
    assert isinstance(caught.value.__context__, BodyError)


def test_cleanup_stack_interrupted_body_stays_primary() -> None:
    with pytest.raises(KeyboardInterrupt) as caught, CleanupStack() as stack:
        stack.callback(Recorder(CleanupError("late")).close)
        raise KeyboardInterrupt
    assert notes(caught.value) == [
        "while cleaning up <bound method Recorder.close of Recorder()>, this also "
        "failed: CleanupError: late"
    ]


def test_cleanup_stack_member_reraising_the_body_error_is_no_failure() -> None:
    with pytest.raises(BodyError) as caught, CleanupStack() as stack:
        stack.enter(Reraiser())
        raise BodyError
    assert notes(caught.value) == []


def test_cleanup_stack_failed_enter_registers_nothing() -> None:
    log: list[str] = []
    with CleanupStack() as stack:
        with pytest.raises(BodyError):
            stack.enter(Member("a", log, fail_enter=BodyError()))
        with pytest.raises(TypeError, match="not a context manager"):
            stack.enter(Recorder())  # type: ignore[arg-type]  # deliberately wrong
        assert len(stack) == 0


class _StaticEnter:
    __enter__ = staticmethod(lambda: "a staticmethod")

    def __exit__(self, *exc_info: object) -> None:
        pass


class _PropertyEnter:
    @property
    def __enter__(self) -> Callable[[], str]:
        return lambda: "what a property returned"

    def __exit__(self, *exc_info: object) -> None:
        pass


class _BrokenPropertyEnter:
    @property
    def __enter__(self) -> Callable[[], str]:
        raise AttributeError("a bug inside the property")

    def __exit__(self, *exc_info: object) -> None:
        pass


class _GetOnTheMetaclass(type):
    def __get__(cls, instance: object, owner: type | None = None) -> object:
        return lambda: "bound by the metaclass"


class _CalledUnbound(metaclass=_GetOnTheMetaclass):
    def __call__(self) -> str:
        return "called unbound"


class _MetaclassGetEnter:
    __enter__ = _CalledUnbound()

    def __exit__(self, *exc_info: object) -> None:
        pass


def _entered(enter: Callable[[], object]) -> object:
    try:
        return enter()
    except Exception as error:  # noqa: BLE001 - the outcome is compared
        return f"{type(error).__name__}: {error}"


@pytest.mark.parametrize(
    "manager_type",
    [_StaticEnter, _PropertyEnter, _BrokenPropertyEnter, _MetaclassGetEnter],
)
def test_cleanup_stack_finds_enter_and_exit_as_with_does(manager_type: type) -> None:
    entered: list[object] = []

    def with_statement() -> object:
        with manager_type() as value:
            pass
        return value

    def cleanup_stack() -> object:
        with CleanupStack() as stack:
            entered.append(stack.enter(manager_type()))
        return entered.pop()

    assert _entered(cleanup_stack) == _entered(with_statement)


def test_cleanup_stack_callback_passes_arguments_and_returns_it() -> None:
    calls: list[tuple[object, ...]] = []

    def record(*args: object, **kwargs: object) -> None:
        calls.append((*args, *kwargs.items()))

    with CleanupStack() as stack:
        assert stack.callback(record, 1, 2, key="value") is record
    assert calls == [(1, 2, ("key", "value"))]


def test_cleanup_stack_pop_all_transfers_ownership() -> None:
    log: list[str] = []
    with CleanupStack() as stack:
        stack.enter(Member("kept", log))
        kept = stack.pop_all()
    assert log == ["enter kept"]
    assert len(kept) == 1
    kept.close()
    assert log == ["enter kept", "exit kept saw None"]


def test_cleanup_stack_close_is_idempotent_and_is_single_use() -> None:
    log: list[str] = []
    stack = CleanupStack()
    stack.callback(log.append, "ran")
    stack.close()
    stack.close()
    assert log == ["ran"]
    with pytest.raises(ClosedResourceError, match="CleanupStack with 0 pending"):
        stack.callback(log.append, "late")
    with pytest.raises(ReentryError), stack:
        pass


def test_cleanup_stack_nested_groups_keep_every_error() -> None:
    with pytest.raises(ExceptionGroup) as caught, CleanupStack() as outer:
        outer.callback(Recorder(CleanupError("outer")).close)
        inner = outer.enter(CleanupStack())
        inner.callback(Recorder(CleanupError("inner")).close)
    assert caught.group_contains(CleanupError, match="inner", depth=2)
    assert caught.group_contains(CleanupError, match="outer", depth=1)


_LOCKS = (threading.Lock(), threading.Lock())


def _locks_free() -> bool:
    return not any(lock.locked() for lock in _LOCKS)


@pytest.mark.parametrize(
    "factory",
    [
        pytest.param(lambda: enter_all(*_LOCKS), id="enter_all"),
        pytest.param(lambda: Acquired(_LOCKS[0], timeout=5.0), id="Acquired"),
    ],
)
def test_helpers_keep_the_contract(factory: Callable[[], object]) -> None:
    """Every interrupt point of entering, of the exit and of ``close()``."""
    report = check_resource(factory, released=_locks_free)  # type: ignore[arg-type]
    assert report.interrupts > 0


def test_acquire_release_keeps_the_contract(tmp_path: Path) -> None:
    (tmp_path / "data").write_bytes(b"")
    raw_file = AcquireRelease(os.open, os.close)
    report = check_resource(lambda: raw_file(tmp_path / "data", os.O_RDONLY))
    assert report.failed_calls > 0


def test_cleanup_stack_collected_runs_its_cleanups_when_warnings_are_errors(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    log: list[str] = []
    unraisable: list[type[BaseException] | None] = []
    stack = CleanupStack()
    stack.callback(log.append, "ran")
    monkeypatch.setattr(sys, "unraisablehook", lambda u: unraisable.append(u.exc_type))
    with warnings.catch_warnings():
        warnings.simplefilter("error", ResourceWarning)
        del stack
        gc.collect()
    assert log == ["ran"]
    assert unraisable == [ResourceWarning]


def test_cleanup_stack_collected_with_pending_cleanups_warns_and_runs_them() -> None:
    log: list[str] = []
    stack = CleanupStack()
    stack.callback(log.append, "ran")
    with pytest.warns(ResourceWarning, match="unclosed <CleanupStack with 1 pending"):
        del stack
        gc.collect()
    assert log == ["ran"]


def test_cleanup_stack_with_pending_cleanups_is_reported_by_leak_check() -> None:
    with LeakCheck(settle=0):
        empty = CleanupStack().__enter__()  # nothing pending: nothing held
    assert len(empty) == 0
    stack = CleanupStack()
    left_open = "unreleased <CleanupStack with 1 pending"
    with pytest.raises(LeakError, match=left_open), LeakCheck(settle=0):
        stack.callback(list)
    stack.close()
    group = enter_all(Member("a", []))
    with pytest.raises(LeakError, match=left_open), LeakCheck(settle=0):
        group.__enter__()
    group.__exit__(None, None, None)


# enter_all


def test_enter_all_enters_in_order_and_releases_in_reverse(tmp_path: Path) -> None:
    log: list[str] = []
    source = tmp_path / "source.txt"
    source.write_text("data", encoding="utf-8")
    with LeakCheck(settle=0):
        group = enter_all(
            Member("a", log),
            open(source, encoding="utf-8"),  # noqa: SIM115 - enter_all closes it
            open(tmp_path / "copy.txt", "w", encoding="utf-8"),  # noqa: SIM115
        )
        with group as (name, reader, writer):
            assert name == "a"
            writer.write(reader.read())
        assert reader.closed
        assert writer.closed
    assert log == ["enter a", "exit a saw None"]
    assert (tmp_path / "copy.txt").read_text(encoding="utf-8") == "data"


def test_enter_all_failed_enter_releases_what_was_entered() -> None:
    log: list[str] = []
    group = enter_all(
        Member("a", log),
        Member("b", log, fail_exit=CleanupError("b failed")),
        Member("c", log, fail_enter=BodyError()),
    )
    with pytest.raises(BodyError) as caught, group:
        pytest.fail("the body must not run")
    assert log == ["enter a", "enter b", "exit b saw BodyError", "exit a saw BodyError"]
    assert notes(caught.value) == [
        "while cleaning up Member('b'), this also failed: CleanupError: b failed"
    ]


def test_enter_all_groups_release_failures_and_keeps_body_error() -> None:
    log: list[str] = []
    members = [Member(name, log, fail_exit=CleanupError(name)) for name in "ab"]
    with pytest.raises(ExceptionGroup, match="2 cleanups failed"), enter_all(*members):
        pass
    members = [Member(name, log, fail_exit=CleanupError(name)) for name in "ab"]
    with pytest.raises(BodyError) as caught, enter_all(*members):
        raise BodyError
    assert len(notes(caught.value)) == 2


def test_enter_all_is_single_use() -> None:
    group = enter_all(Member("a", []))
    with group:
        pass
    with pytest.raises(ReentryError, match=r"ContextGroup\(Member\('a'\)\)"), group:
        pass


# Acquired


@pytest.mark.parametrize(
    "lock",
    [
        threading.Lock(),
        threading.RLock(),
        threading.Semaphore(1),
        threading.Condition(),
    ],
    ids=["Lock", "RLock", "Semaphore", "Condition"],
)
def test_acquired_holds_the_lock_for_the_block(lock: SupportsTimedAcquire) -> None:
    with Acquired(lock, timeout=1.0) as held:
        assert held is lock
        assert not _acquirable_elsewhere(lock)
    assert _acquirable_elsewhere(lock)


def _acquirable_elsewhere(lock: SupportsTimedAcquire) -> bool:
    result: list[bool] = []

    def probe() -> None:
        acquired = lock.acquire(timeout=0.01)
        if acquired:
            lock.release()
        result.append(acquired)

    thread = threading.Thread(target=probe)
    thread.start()
    thread.join()
    return result[0]


def test_acquired_times_out_without_running_the_block() -> None:
    lock = threading.Lock()
    with lock:
        acquired = Acquired(lock, timeout=0.01)
        with (
            pytest.raises(TimeoutError, match=r"not acquired within 0\.01 s"),
            acquired,
        ):
            pytest.fail("the body must not run")
        assert lock.locked()
        assert not acquired.held
    assert not lock.locked()


def test_acquired_names_the_lock_and_refuses_a_negative_timeout() -> None:
    lock = threading.Lock()
    with lock:
        acquired = Acquired(lock, timeout=0.01, name="cache")
        with pytest.raises(TimeoutError, match=r"Acquired\('cache', timeout=0\.01\)"):
            acquired.__enter__()
    with pytest.raises(ValueError, match="timeout must be a number of seconds >= 0"):
        Acquired(lock, timeout=-1)


class DeclaredLock:
    """A ``SupportsTimedAcquire`` exactly as declared, and nothing more."""

    def __init__(self) -> None:
        self.lock = threading.Lock()

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        return self.lock.acquire(blocking, timeout)

    def release(self) -> None:
        self.lock.release()


@pytest.mark.parametrize("timeout", [1.0, None])
def test_acquired_accepts_any_supports_timed_acquire(timeout: float | None) -> None:
    lock = DeclaredLock()
    with Acquired(lock, timeout=timeout) as held:
        assert held is lock
        assert lock.lock.locked()
    assert not lock.lock.locked()


@pytest.mark.parametrize("error", [BodyError, KeyboardInterrupt])
def test_acquired_releases_when_the_block_raises(error: type[BaseException]) -> None:
    lock = threading.Lock()
    with pytest.raises(error), Acquired(lock, timeout=None):
        raise error
    assert not lock.locked()


def test_acquired_release_is_idempotent_and_single_use() -> None:
    lock = threading.Lock()
    acquired = Acquired(lock, timeout=1)
    acquired.release()
    with acquired:
        acquired.release()
        assert not lock.locked()
        acquired.release()
    with pytest.raises(ReentryError, match="Acquired"), acquired:
        pass


def test_acquired_collected_while_held_warns_and_releases() -> None:
    lock = threading.Lock()
    acquired = Acquired(lock, timeout=1)
    acquired.__enter__()
    with pytest.warns(ResourceWarning, match=r"unclosed Acquired\(<locked "):
        del acquired
        gc.collect()
    assert not lock.locked()


def test_acquired_left_held_is_reported_by_leak_check() -> None:
    acquired = Acquired(threading.Lock(), timeout=1)
    with pytest.raises(LeakError, match=r"unreleased Acquired\("), LeakCheck(settle=0):
        acquired.__enter__()
    acquired.release()


# Holding KeyboardInterrupt back


@pytest.fixture
def python_sigint() -> Iterator[None]:
    """Python's own SIGINT handler, whatever the process inherited (a job started
    in the background inherits SIGINT ignored)."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


@pytest.mark.usefixtures("python_sigint")
def test_deferred_interrupt_is_raised_once_the_block_has_run() -> None:
    steps: list[str] = []
    with pytest.raises(KeyboardInterrupt):
        with deferred_interrupts():
            with deferred_interrupts():  # blocks nest: the outermost delivers
                signal.raise_signal(signal.SIGINT)
                steps.append("inner")
            assert deferred_interrupts().deferring()
            signal.raise_signal(signal.SIGINT)
            steps.append("outer")
        steps.append("after")
    assert steps == ["inner", "outer"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    assert not deferred_interrupts().deferring()


class _Dropped:
    """An object to watch for being freed."""


@pytest.mark.usefixtures("python_sigint")
def test_deferred_interrupt_noted_in_the_exit_frees_the_block_frame() -> None:
    # The signal lands in __exit__ itself, just before it puts the handler back.
    deferral = deferred_interrupts()
    exit_code = type(deferral).__exit__.__code__
    watched: list[weakref.ref[_Dropped]] = []

    def land_in_exit(frame: FrameType, event: str, arg: object) -> None:
        if event == "c_call" and frame.f_code is exit_code:
            sys.setprofile(None)
            deferral._note(signal.SIGINT, frame)

    def block() -> None:
        dropped = _Dropped()
        watched.append(weakref.ref(dropped))
        with deferral:
            sys.setprofile(land_in_exit)

    gc.disable()
    try:
        with pytest.raises(KeyboardInterrupt):
            block()
        assert watched[0]() is None  # freed by reference counting, with no collection
    finally:
        sys.setprofile(None)
        gc.enable()


def test_deferred_signal_goes_to_the_handler_in_place_once() -> None:
    calls: list[str] = []

    def handler(signum: int, frame: FrameType | None) -> None:
        calls.append("deferred" if deferred_interrupts().deferring() else "late")

    previous = signal.signal(signal.SIGINT, handler)
    try:
        with deferred_interrupts():
            signal.raise_signal(signal.SIGINT)
            signal.raise_signal(signal.SIGINT)
            assert calls == []
        assert calls == ["late"]
        assert signal.getsignal(signal.SIGINT) is handler
    finally:
        signal.signal(signal.SIGINT, previous)


@pytest.mark.usefixtures("python_sigint")
def test_deferred_interrupts_do_nothing_in_other_threads() -> None:
    seen: list[object] = []

    def run() -> None:
        with deferred_interrupts():
            seen.extend((deferred_interrupts().deferring(), signal.getsignal(2)))

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    assert seen == [False, signal.default_int_handler]


@pytest.mark.usefixtures("python_sigint")
def test_interrupted_join_thread_leaves_the_thread_running_and_joinable(
    sigint_once_in: Callable[[CodeType], None],
) -> None:
    # On 3.11 and 3.12 an interrupt inside Thread.join() marks a running thread
    # stopped (bpo-45274), after which join() returns at once.
    finish = threading.Event()
    worker = threading.Thread(target=finish.wait, name="joined-after-interrupt")
    worker.start()
    sigint_once_in(join_thread.__code__)
    try:
        with pytest.raises(KeyboardInterrupt):
            join_thread(worker)
        assert worker.is_alive()
    finally:
        finish.set()
    join_thread(worker)
    assert not worker.is_alive()


def test_join_thread_interrupted_at_each_line_leaves_no_lock_held() -> None:
    # A trace function (a debugger, coverage) is a check point at every line: an
    # interrupt there must not strand the thread's own lock with the waiter.
    wait = getattr(sys.modules[join_thread.__module__], "_wait_until_free", None)
    codes = {join_thread.__code__} | ({wait.__code__} if wait is not None else set())

    def join_interrupted_at(line: int | None) -> int:
        seen = 0

        def tracer(frame: FrameType, event: str, arg: object) -> Any:
            nonlocal seen
            if frame.f_code not in codes:
                return None
            if event == "line":
                seen += 1
                if seen == line:
                    raise KeyboardInterrupt
            return tracer

        worker = threading.Thread(target=time.sleep, args=(0.01,), daemon=True)
        worker.start()
        sys.settrace(tracer)
        try:
            join_thread(worker)
        except KeyboardInterrupt:
            assert seen == line
        finally:
            sys.settrace(None)
        again = threading.Thread(target=join_thread, args=(worker,), daemon=True)
        again.start()
        again.join(5.0)
        assert not again.is_alive(), f"interrupted at line event {line}: lock held"
        return seen

    lines = join_interrupted_at(None)
    assert lines >= 2
    for line in range(1, lines + 1):
        join_interrupted_at(line)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork() here")
@pytest.mark.usefixtures("python_sigint")
def test_deferred_interrupts_end_in_a_child_forked_in_a_block() -> None:
    with deferred_interrupts(), warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # fork with threads
        pid = os.fork()
        if pid == 0:  # the child: its handler is Python's again
            restored = signal.getsignal(signal.SIGINT) is signal.default_int_handler
            os._exit(0 if restored and not deferred_interrupts().deferring() else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


@pytest.mark.usefixtures("python_sigint")
def test_acquired_waits_for_a_semaphore_in_slices_that_ctrl_c_ends() -> None:
    semaphore = threading.Semaphore(0)
    main = threading.main_thread().ident
    assert main is not None
    timer = threading.Timer(0.1, signal.pthread_kill, (main, signal.SIGINT))
    started = time.monotonic()
    timer.start()
    with pytest.raises(KeyboardInterrupt), Acquired(semaphore, timeout=5.0):
        pytest.fail("the body must not run")
    waited = time.monotonic() - started
    timer.join()
    assert 0.1 <= waited < 1.0
    assert semaphore.acquire(blocking=False) is False  # its count is still 0
    semaphore.release()
    with Acquired(semaphore, timeout=0.05):
        assert semaphore.acquire(blocking=False) is False
    with semaphore, pytest.raises(TimeoutError), Acquired(semaphore, timeout=0.05):
        pytest.fail("the body must not run")


# AcquireRelease and Acquisition


raw_file = AcquireRelease(os.open, os.close)


def _open_and_close(path: Path) -> None:
    with raw_file(path, os.O_RDONLY) as fd:
        os.fstat(fd)


def _open_several(path: Path) -> None:
    with enter_all(raw_file(path, os.O_RDONLY), raw_file(path, os.O_RDONLY)):
        pass


def test_acquire_release_makes_a_typed_reusable_factory(tmp_path: Path) -> None:
    path = tmp_path / "data.bin"
    path.write_bytes(b"\x00" * 16)
    with LeakCheck(settle=0):
        for _ in range(3):
            with raw_file(path, os.O_RDONLY) as fd:
                assert os.read(fd, 4) == b"\x00" * 4
    assert repr(raw_file) == "AcquireRelease(open, close)"


def test_acquisition_failed_acquire_releases_nothing() -> None:
    released: list[int] = []
    acquisition = AcquireRelease(int, released.append)("not a number")
    with pytest.raises(ValueError, match="invalid literal"), acquisition:
        pytest.fail("the body must not run")
    assert released == []
    assert acquisition.closed
    with pytest.raises(ClosedResourceError, match=r"Acquisition\(int, .*\) is closed"):
        _ = acquisition.value
    with pytest.raises(ReentryError), acquisition:
        pytest.fail("a failed acquisition is spent")
    assert released == []


@pytest.mark.parametrize("error", [BodyError, KeyboardInterrupt])
def test_acquisition_releases_once_when_the_block_raises(
    error: type[BaseException],
) -> None:
    released: list[int] = []
    with pytest.raises(error), AcquireRelease(int, released.append)("7") as value:
        assert value == 7
        raise error
    assert released == [7]


def test_acquisition_release_failure_rules() -> None:
    def failing_release(value: int) -> None:
        raise CleanupError(value)

    factory = AcquireRelease(int, failing_release)
    with pytest.raises(CleanupError), factory("1"):
        pass
    with pytest.raises(BodyError) as caught, factory("2"):
        raise BodyError
    assert notes(caught.value) == [
        "while cleaning up Acquisition(int, test_acquisition_release_failure_rules"
        ".<locals>.failing_release), this also failed: CleanupError: 2"
    ]


def test_acquisition_is_single_use_and_close_is_idempotent() -> None:
    released: list[int] = []
    acquisition = Acquisition(lambda: 5, released.append)
    acquisition.close()
    with acquisition as value:
        assert acquisition.value == value == 5
        acquisition.close()
        acquisition.close()
    assert released == [5]
    assert acquisition.closed
    closed = r"Acquisition\(.*<lambda>.*is closed"
    with pytest.raises(ClosedResourceError, match=closed):
        _ = acquisition.value
    with pytest.raises(ReentryError), acquisition:
        pass


def test_acquisition_value_may_be_none() -> None:
    released: list[None] = []
    acquisition = Acquisition(lambda: None, released.append)
    with acquisition as value:
        assert value is None
        assert acquisition.value is None
    assert released == [None]
    with pytest.raises(ClosedResourceError, match="is closed"):
        _ = acquisition.value


def test_acquisition_collected_open_warns_and_releases(tmp_path: Path) -> None:
    acquisition = raw_file(tmp_path, os.O_RDONLY)
    fd = acquisition.__enter__()
    with pytest.warns(ResourceWarning, match=r"unclosed Acquisition\(open, close\)"):
        del acquisition
        gc.collect()
    with pytest.raises(OSError, match="Bad file descriptor"):
        os.fstat(fd)


def test_a_cancelled_call_in_a_thread_keeps_its_error_as_context() -> None:
    reported: list[str] = []
    started = threading.Event()

    def fails_late() -> None:
        started.set()
        time.sleep(0.05)
        raise OSError("failed after the cancellation")

    async def main() -> None:
        asyncio.get_running_loop().set_exception_handler(
            lambda loop, context: reported.append(context["message"])
        )
        task = asyncio.ensure_future(run_in_thread(fails_late))
        await asyncio.to_thread(started.wait)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    gc.collect()  # the worker's future goes with the loop, and logs then
    assert reported == []  # an exception that nobody retrieved


# AsyncCleanupStack


class AsyncMember:
    """An async context manager that logs what its ``__aexit__`` saw; can fail."""

    def __init__(
        self, name: str, log: list[str], *, fail_exit: BaseException | None = None
    ) -> None:
        self.name = name
        self.log = log
        self.fail_exit = fail_exit

    def __repr__(self) -> str:
        return f"AsyncMember({self.name!r})"

    async def __aenter__(self) -> str:
        await asyncio.sleep(0)
        self.log.append(f"enter {self.name}")
        return self.name

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await asyncio.sleep(0)
        self.log.append(f"exit {self.name} saw {type(exc).__name__ if exc else None}")
        if self.fail_exit is not None:
            raise self.fail_exit


def test_async_cleanup_stack_releases_in_reverse_order() -> None:
    log: list[str] = []

    async def note(text: str) -> None:
        await asyncio.sleep(0)
        log.append(text)

    async def main() -> None:
        async with AsyncCleanupStack() as stack:
            assert await stack.enter_async(AsyncMember("a", log)) == "a"
            stack.enter(Member("b", log))
            stack.callback(log.append, "callback c")
            assert stack.async_callback(note, "async callback d") is note
            assert len(stack) == 4

    asyncio.run(main())
    assert log == [
        "enter a",
        "enter b",
        "async callback d",
        "callback c",
        "exit b saw None",
        "exit a saw None",
    ]


def test_async_cleanup_stack_failure_rules() -> None:
    log: list[str] = []

    async def grouped() -> None:
        async with AsyncCleanupStack() as stack:
            await stack.enter_async(AsyncMember("a", log, fail_exit=CleanupError("a")))
            stack.enter(Member("b", log, fail_exit=CleanupError("b")))

    async def body_first() -> None:
        async with AsyncCleanupStack() as stack:
            await stack.enter_async(AsyncMember("c", log, fail_exit=CleanupError("c")))
            raise BodyError

    with pytest.raises(ExceptionGroup, match="2 cleanups failed") as group:
        asyncio.run(grouped())
    assert [str(error) for error in group.value.exceptions] == ["b", "a"]
    with pytest.raises(BodyError) as caught:
        asyncio.run(body_first())
    assert log[-1] == "exit c saw BodyError"
    assert notes(caught.value) == [
        "while cleaning up AsyncMember('c'), this also failed: CleanupError: c"
    ]


def test_async_cleanup_stack_cancelled_aclose_still_runs_every_cleanup() -> None:
    log: list[str] = []
    started = asyncio.Event

    async def slow_cleanup(began: asyncio.Event) -> None:
        began.set()
        await asyncio.sleep(10)

    async def main() -> None:
        began = started()
        stack = AsyncCleanupStack()
        stack.callback(log.append, "first registered")
        stack.async_callback(slow_cleanup, began)
        stack.callback(log.append, "last registered")
        closing = asyncio.create_task(stack.aclose())
        await began.wait()
        closing.cancel()
        with pytest.raises(asyncio.CancelledError):
            await closing
        assert len(stack) == 0
        await stack.aclose()

    asyncio.run(main())
    assert log == ["last registered", "first registered"]


def test_async_cleanup_stack_is_single_use_and_aclose_is_idempotent() -> None:
    log: list[str] = []

    async def main() -> None:
        stack = AsyncCleanupStack()
        async with stack:
            stack.callback(log.append, "ran")
        await stack.aclose()
        with pytest.raises(ReentryError):
            async with stack:
                pass
        with pytest.raises(ClosedResourceError):
            stack.callback(log.append, "late")
        with pytest.raises(TypeError, match="not an async context manager"):
            await AsyncCleanupStack().enter_async(Member("sync", log))  # type: ignore[arg-type]  # deliberately wrong

    asyncio.run(main())
    assert log == ["ran"]


def test_async_cleanup_stack_collected_warns_and_runs_sync_cleanups() -> None:
    log: list[str] = []

    async def never() -> None:
        log.append("async ran")

    stack = AsyncCleanupStack()
    stack.callback(log.append, "sync ran")
    stack.async_callback(never)
    with pytest.warns(ResourceWarning, match="unclosed <AsyncCleanupStack with 2"):
        del stack
        gc.collect()
    assert log == ["sync ran"]


# AsyncClosingWith


class AsyncClient:
    """Released by ``await disconnect()``; counts the calls."""

    def __init__(self, error: BaseException | None = None) -> None:
        self.disconnects = 0
        self.error = error

    def __repr__(self) -> str:
        return "AsyncClient()"

    async def disconnect(self, *, reason: str = "done") -> None:
        await asyncio.sleep(0)
        self.disconnects += 1
        if self.error is not None:
            raise self.error
        assert reason == "bye"


def test_async_closing_with_awaits_the_named_method() -> None:
    client = AsyncClient()

    async def main() -> None:
        async with AsyncClosingWith(client, "disconnect", reason="bye") as entered:
            assert entered is client
        with pytest.raises(BodyError):
            async with AsyncClosingWith(client, "disconnect", reason="bye"):
                raise BodyError

    asyncio.run(main())
    assert client.disconnects == 2


def test_async_closing_with_failure_rules() -> None:
    client = AsyncClient(CleanupError("gone"))

    async def alone() -> None:
        async with AsyncClosingWith(client, "disconnect"):
            pass

    async def with_body_error() -> None:
        async with AsyncClosingWith(client, "disconnect"):
            raise BodyError

    with pytest.raises(CleanupError, match="gone"):
        asyncio.run(alone())
    with pytest.raises(BodyError) as caught:
        asyncio.run(with_body_error())
    assert notes(caught.value) == [
        "while cleaning up AsyncClosingWith(AsyncClient(), 'disconnect'), "
        "this also failed: CleanupError: gone"
    ]


def test_async_closing_with_cancelled_exit_still_completes_the_release() -> None:
    class SlowClient:
        def __init__(self) -> None:
            self.closed = False

        async def aclose(self) -> None:
            await asyncio.sleep(0.2)
            self.closed = True

    client = SlowClient()
    closing = AsyncClosingWith(client)

    async def main() -> None:
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.05), closing:
                pass

    asyncio.run(main())
    # The release runs as a task of its own: the cancellation waits for it.
    assert client.closed
    assert closing.closed


def test_async_closing_with_single_use_aclose_idempotent_and_checked() -> None:
    client = AsyncClient()
    closing = AsyncClosingWith(client, "disconnect", reason="bye")

    async def main() -> None:
        async with closing:
            await closing.aclose()
            await closing.aclose()
        with pytest.raises(ReentryError):
            async with closing:
                pass
        with pytest.raises(ClosedResourceError):
            _ = closing.thing

    asyncio.run(main())
    assert client.disconnects == 1
    with pytest.raises(TypeError, match="no aclose"):
        AsyncClosingWith(client)


def test_async_closing_with_owns_its_thing_before_the_block() -> None:
    client = AsyncClient()
    closing = AsyncClosingWith(client, "disconnect", reason="bye")

    async def main() -> None:
        await closing.aclose()
        await closing.aclose()
        assert client.disconnects == 1
        with pytest.raises(ReentryError):
            async with closing:
                pass

    asyncio.run(main())
    assert client.disconnects == 1
    unentered = AsyncClosingWith(AsyncClient(), "disconnect")
    with pytest.warns(ResourceWarning, match="its release was never awaited"):
        del unentered
        gc.collect()


def test_async_closing_with_collected_open_warns() -> None:
    async def main() -> None:
        client = AsyncClient()
        closing = AsyncClosingWith(client, "disconnect")
        await closing.__aenter__()
        never_awaited = (
            r"unclosed AsyncClosingWith\(AsyncClient\(\), 'disconnect'\): "
            "its release was never awaited"
        )
        with pytest.warns(ResourceWarning, match=never_awaited):
            del closing
            gc.collect()
        assert client.disconnects == 0

    asyncio.run(main())


def test_acquire_release_scale_under_fd_limit(tmp_path: Path) -> None:
    run_with_fd_limit(functools.partial(_open_and_close, tmp_path))
    run_with_fd_limit(functools.partial(_open_several, tmp_path), repeat=200)


# fork(): a block left in a child forked inside it


class _Closable:
    """Records the calls of its ``close()``."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def close(self) -> None:
        self.calls.append("close")


def _called_nothing(thing: _Closable) -> Callable[[object], None]:
    def then(_: object) -> None:
        assert thing.calls == [], "the forked child released the parent's object"

    return then


class _AsyncClosable(_Closable):
    async def aclose(self) -> None:
        self.calls.append("aclose")


@pytest.mark.parametrize("raising", [False, True])
def test_async_helpers_left_in_a_forked_child_release_nothing_of_the_parents(
    raising: bool,
) -> None:
    thing = _AsyncClosable()
    calls: list[str] = []

    def then(_: object) -> None:
        assert calls == ["child"]

    async def main() -> None:
        async with children.async_left_in_child(
            AsyncClosingWith(thing), raising=raising, then=_called_nothing(thing)
        ):
            pass
        async with children.async_left_in_child(
            AsyncCleanupStack(),
            raising=raising,
            before=lambda stack: stack.callback(calls.append, "parent"),
            inside=lambda stack: stack.callback(calls.append, "child"),
            then=then,
        ):
            pass

    asyncio.run(main())
    assert thing.calls == ["aclose"]
    assert calls == ["parent"]


@pytest.mark.parametrize("raising", [False, True])
def test_closing_with_left_in_a_forked_child_calls_nothing(raising: bool) -> None:
    thing = _Closable()
    closing = ClosingWith(thing)
    with children.left_in_child(closing, raising=raising, then=_called_nothing(thing)):
        pass
    assert thing.calls == ["close"]


@pytest.mark.parametrize("raising", [False, True])
def test_acquisition_left_in_a_forked_child_releases_nothing(raising: bool) -> None:
    thing = _Closable()
    acquisition = Acquisition(lambda: thing, _Closable.close)
    then = _called_nothing(thing)
    with children.left_in_child(acquisition, raising=raising, then=then):
        pass
    assert thing.calls == ["close"]


def test_closing_with_collected_in_a_forked_child_calls_nothing() -> None:
    thing = _Closable()
    held = [ClosingWith(thing)]
    held[0].__enter__()

    def collect() -> None:
        held.clear()
        assert thing.calls == []

    children.run_in_child(collect)
    held[0].close()
    assert thing.calls == ["close"]


@pytest.mark.parametrize("raising", [False, True])
def test_cleanup_stack_left_in_a_forked_child_runs_only_the_childs_cleanups(
    raising: bool,
) -> None:
    calls: list[str] = []

    def then(_: object) -> None:
        assert calls == ["child"]

    with children.left_in_child(
        CleanupStack(),
        raising=raising,
        before=lambda stack: stack.callback(calls.append, "parent"),
        inside=lambda stack: stack.callback(calls.append, "child"),
        then=then,
    ):
        pass
    assert calls == ["parent"]


def test_cleanup_stack_collected_in_a_forked_child_runs_only_the_childs_cleanups() -> (
    None
):
    calls: list[str] = []
    held = [CleanupStack()]
    held[0].__enter__()
    held[0].callback(calls.append, "parent")

    def collect() -> None:
        held[0].callback(calls.append, "child")
        with pytest.warns(ResourceWarning, match="unclosed"):  # its own cleanup
            held.clear()
        assert calls == ["child"]

    children.run_in_child(collect)
    held[0].close()
    assert calls == ["parent"]


@pytest.mark.parametrize("raising", [False, True])
def test_context_group_left_in_a_forked_child_releases_no_member(
    raising: bool,
) -> None:
    thing = _Closable()
    group = enter_all(ClosingWith(thing))
    with children.left_in_child(group, raising=raising, then=_called_nothing(thing)):
        pass
    assert thing.calls == ["close"]


@pytest.mark.parametrize("raising", [False, True])
@pytest.mark.parametrize("make_lock", [threading.Lock, threading.Semaphore])
def test_acquired_left_in_a_forked_child_releases_the_childs_copy_only(
    make_lock: Callable[[], Any], raising: bool
) -> None:
    lock = make_lock()

    def then(_: object) -> None:
        assert lock.acquire(blocking=False)  # the child's copy, released

    acquired = Acquired(lock, timeout=5.0)
    with children.left_in_child(acquired, raising=raising, then=then):
        assert not lock.acquire(blocking=False)  # the parent's, still held
    assert lock.acquire(blocking=False)


# Your own code goes below this line: template updates change only what is above it.
