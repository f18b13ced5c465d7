"""What the two pools share: scheduling refused once closing, ``close()``'s rules."""

from __future__ import annotations

import gc
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, ParamSpec, Self, TypeVar

import pytest
from _runtime import children
from _runtime._pools import DeferringSubmit, PoolResource
from _runtime._resource import deferred_interrupts
from _runtime.errors import ClosedResourceError

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator

P = ParamSpec("P")
T = TypeVar("T")


class _Recording(ThreadPoolExecutor):
    """Records whether each ``submit`` ran deferred, and each ``map``'s chunksize."""

    def __init__(self, max_workers: int | None) -> None:
        super().__init__(max_workers)
        self.deferred: list[bool] = []
        self.chunksizes: list[int] = []

    def submit(
        self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs
    ) -> Future[T]:
        self.deferred.append(deferred_interrupts().deferring())
        return super().submit(fn, *args, **kwargs)

    def map(
        self, fn: Callable[..., T], *iterables: Iterable[Any], **options: Any
    ) -> Iterator[T]:
        self.chunksizes.append(options["chunksize"])
        return super().map(fn, *iterables, **options)


class _Executor(DeferringSubmit, _Recording):
    pass


class Pool(PoolResource["Pool"]):
    """The smallest pool: a thread pool shut down by its release.

    ``shut_down`` is set once the release has shut the executor down, before it
    waits for the tasks: a task that waits for it runs until then.
    ``interrupt_release`` makes the next release raise ``KeyboardInterrupt``.
    """

    __slots__ = ("interrupt_release", "shut_down")

    _executor: _Executor | None

    def __init__(self, max_workers: int | None = None) -> None:
        PoolResource.__init__(self, max_workers, "threads")
        self.shut_down = threading.Event()
        self.interrupt_release = False

    def __repr__(self) -> str:
        return "Pool()"

    def _waits_for_caller(self) -> bool:
        executor = self._executor
        if executor is None:
            return False
        with executor._shutdown_lock:  # a new worker is recorded under it
            return threading.current_thread() in executor._threads

    def _acquire(self) -> Self:
        self._executor = _Executor(self._max_workers)
        return self

    def _release(self, *, succeeded: bool) -> None:
        executor = self._executor
        if executor is not None:
            self._closing = True
            if self.interrupt_release:
                self.interrupt_release = False
                raise KeyboardInterrupt
            cancel = self._cancels(succeeded=succeeded)
            executor.shutdown(wait=False, cancel_futures=cancel)
            self.shut_down.set()
            executor.shutdown(wait=not self._collected)
            self._executor = None


@pytest.mark.parametrize("workers", [0, -1])
def test_a_pool_of_no_worker_is_refused(workers: int) -> None:
    with pytest.raises(ValueError, match=f"a number of threads > 0, not {workers}"):
        Pool(workers)


def test_submit_and_map_run_in_the_block_and_are_refused_outside() -> None:
    pool = Pool(2)
    with pytest.raises(ClosedResourceError, match="Pool"):
        pool.submit(print)
    with pool:
        assert pool.submit(pow, 2, 5).result() == 32
        assert list(pool.map(pow, [2, 3], [2, 2], chunksize=4)) == [4, 9]
        executor = pool._executor
        assert executor is not None
        assert executor.deferred == [True, True, True]
        assert executor.chunksizes == [4]
    with pytest.raises(ClosedResourceError, match="is closed"):
        pool.submit(print)
    with pytest.raises(ClosedResourceError, match="is closed"):
        pool.map(print, [1])


@pytest.mark.parametrize(
    ("timeout", "error"),
    [(-1, ValueError), (float("nan"), ValueError), (True, TypeError), ("1", TypeError)],
)
def test_a_bad_map_timeout_is_refused_before_any_task(
    timeout: object, error: type[Exception]
) -> None:
    calls: list[int] = []
    with Pool(1) as pool:
        with pytest.raises(error, match="timeout"):
            pool.map(calls.append, [1], timeout=timeout)  # type: ignore[arg-type]
        assert pool._executor is not None
        assert pool._executor.deferred == []
    assert calls == []


def test_a_refusal_of_a_closing_executor_is_a_closed_resource_error() -> None:
    with Pool(1) as pool:
        executor = pool._executor
        assert executor is not None
        executor.shutdown()
        with pytest.raises(RuntimeError, match="shutdown") as raw:
            pool.submit(print)
        assert type(raw.value) is RuntimeError  # not closing: the executor's own
        pool._closing = True  # as a close() in another thread has set it
        with pytest.raises(ClosedResourceError, match="is being closed") as refused:
            pool.submit(print)
        assert isinstance(refused.value.__cause__, RuntimeError)
        with pytest.raises(ClosedResourceError, match="is being closed"):
            pool.map(print, [1])


@pytest.mark.parametrize(
    ("chosen", "succeeded", "cancels"),
    [
        (None, True, False),
        (None, False, True),
        (True, True, True),
        (False, False, False),
    ],
)
def test_the_release_cancels_by_close_s_choice_else_on_failure(
    chosen: bool | None, succeeded: bool, cancels: bool
) -> None:
    pool = Pool(1)
    pool._cancel_futures = chosen
    assert pool._cancels(succeeded=succeeded) is cancels


def _run_and_queue(pool: Pool) -> tuple[Future[bool], Future[None]]:
    """A task that runs until the pool is shut down, and one queued behind it."""
    started = threading.Event()

    def block() -> bool:
        started.set()
        return pool.shut_down.wait(10)

    running = pool.submit(block)
    pending = pool.submit(print, end="")
    assert started.wait(10)
    return running, pending


@pytest.mark.parametrize(
    ("close", "cancelled"),
    [
        (lambda pool: pool.close(), False),
        (lambda pool: pool.close(cancel_futures=False), False),
        (lambda pool: pool.close(cancel_futures=True), True),
        (lambda pool: pool.__exit__(None, None, None), False),
        (lambda pool: pool.__exit__(ValueError, ValueError(), None), True),
    ],
    ids=["close()", "close(False)", "close(True)", "exit", "exit-on-error"],
)
def test_the_release_cancels_pending_tasks_by_close_s_choice_else_on_error(
    close: Callable[[Pool], object], cancelled: bool
) -> None:
    pool = Pool(1).__enter__()
    running, pending = _run_and_queue(pool)
    close(pool)
    assert pool.closed
    assert pool._cancel_futures is None
    assert running.result(0) is True  # ran until the shutdown: waited for
    assert pending.cancelled() is cancelled
    assert pending.done()


def test_an_interrupted_close_forgets_its_choice() -> None:
    pool = Pool(1).__enter__()
    running, pending = _run_and_queue(pool)
    pool.interrupt_release = True
    with pytest.raises(KeyboardInterrupt):
        pool.close(cancel_futures=True)
    assert pool._cancel_futures is None
    assert not pool.closed
    pool.close()  # the release again, without the interrupted close's choice
    assert running.result(0) is True
    assert not pending.cancelled()


def test_close_from_a_worker_is_refused_and_changes_nothing() -> None:
    def close_the_pool(pool: Pool) -> str:
        with pytest.raises(RuntimeError, match="would wait for the thread that calls"):
            pool.close(cancel_futures=True)
        return "refused"

    with Pool(1) as pool:
        assert pool.submit(close_the_pool, pool).result(10) == "refused"
        closed = [pool.closed]
        assert pool._cancel_futures is None
        running, pending = _run_and_queue(pool)
    closed.append(pool.closed)
    assert closed == [False, True]
    assert running.result(0) is True
    assert not pending.cancelled()  # the refused close's choice was not kept


def test_close_in_a_child_forked_by_a_worker_closes_the_child_s_copy() -> None:
    """The copy in the child waits for nobody, and asks no lock who would."""

    def close_the_copy(pool: Pool) -> None:
        pool.close()
        assert pool.closed

    def fork_and_close(pool: Pool, go: threading.Event) -> None:
        assert go.wait(10)
        children.run_in_child(lambda: close_the_copy(pool))

    go = threading.Event()
    with Pool(1) as pool:
        executor = pool._executor
        assert executor is not None
        forked = pool.submit(fork_and_close, pool, go)
        # Held at the fork by a thread the child does not have: never released
        # there, so the child's close() must not ask which thread it is.
        with executor._shutdown_lock:
            go.set()
            forked.result(60)
        assert not pool.closed
        assert pool.submit(pow, 3, 2).result(10) == 9


def test_a_map_timeout_counts_from_the_call() -> None:
    release = threading.Event()
    with Pool(1) as pool:
        results = pool.map(release.wait, [10], timeout=0.05)
        with pytest.raises(TimeoutError):
            next(results)
        release.set()


def test_a_refusal_after_the_close_says_closed() -> None:
    pool = Pool(1)
    with pool:
        pool._raise_if_closing(RuntimeError())  # not closing: no error
    with pytest.raises(ClosedResourceError, match=r"Pool\(\) is closed"):
        pool._raise_if_closing(RuntimeError())


def test_a_pool_collected_open_waits_for_no_worker() -> None:
    release = threading.Event()
    pool = Pool(1).__enter__()
    executor = pool._executor
    assert executor is not None
    running = executor.submit(release.wait, 10)
    with pytest.warns(ResourceWarning, match="Pool"):
        del pool
        gc.collect()
    assert not running.done()  # the release did not wait for it
    release.set()
    running.result(10)
    executor.shutdown()
