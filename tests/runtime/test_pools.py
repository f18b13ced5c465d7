"""What the two pools share: scheduling refused once closing, ``close()``'s rules."""

from __future__ import annotations

import gc
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, ParamSpec, Self, TypeVar

import pytest
from _runtime._pools import DeferringSubmit, PoolResource
from _runtime._resource import deferred_interrupts
from _runtime.errors import ClosedResourceError

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator
    from concurrent.futures import Future

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
    """The smallest pool: a thread pool shut down by its release."""

    __slots__ = ()

    _executor: _Executor | None

    def __init__(self, max_workers: int | None = None) -> None:
        PoolResource.__init__(self, max_workers, "threads")

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
            cancel = self._cancels(succeeded=succeeded)
            executor.shutdown(wait=not self._collected, cancel_futures=cancel)
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


def test_close_cancels_pending_tasks_when_asked_and_forgets_the_choice() -> None:
    started, release = threading.Event(), threading.Event()

    def block() -> None:
        started.set()
        release.wait(10)

    with Pool(1) as pool:
        running = pool.submit(block)
        pending = pool.submit(print)
        started.wait(10)
        threading.Timer(0.05, release.set).start()
        pool.close(cancel_futures=True)
        assert pool._cancel_futures is None
    assert running.done()
    assert not running.cancelled()
    assert pending.cancelled()


def test_close_from_a_worker_is_refused_and_changes_nothing() -> None:
    def close_the_pool(pool: Pool) -> str:
        with pytest.raises(RuntimeError, match="would wait for the thread that calls"):
            pool.close()
        return "refused"

    with Pool(1) as pool:
        assert pool.submit(close_the_pool, pool).result(10) == "refused"
        assert not pool.closed
        assert pool.submit(pow, 3, 2).result(10) == 9
    assert pool.closed


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
