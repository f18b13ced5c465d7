"""What the thread pool and the process pool share: ``submit``, ``map``, ``close``.

A ``PoolResource`` holds a ``concurrent.futures`` executor between its block's
start and end.  Its subclass makes the executor (``_acquire``), shuts it down and
joins its workers (``_release``), and says which thread would wait for itself
in ``close()`` (``_waits_for_caller``).
"""

from __future__ import annotations

import threading
from concurrent.futures import Executor
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

from ._checks import FROM_0_TO_TIMEOUT_MAX, checked_timeout
from ._resource import Resource, deferred_interrupts
from .errors import ClosedResourceError

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator
    from concurrent.futures import Future

P = ParamSpec("P")
T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)


class DeferringSubmit(Executor):
    """An executor whose ``submit`` runs with interrupts deferred.

    ``submit`` may start a worker, in standard-library code that an interrupt
    could leave half done (a worker started but not recorded, which no shutdown
    would stop).  It waits for no task, only for a worker to start (a process
    pool's first one starts the fork server too), and ``map`` submits through it.
    """

    def submit(
        self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs
    ) -> Future[T]:
        with deferred_interrupts():
            return super().submit(fn, *args, **kwargs)


class PoolResource(Resource[T_co]):
    """A resource that holds an executor: its scheduling, refused once closing."""

    __slots__ = (
        "_cancel_futures",
        "_closing",
        "_collected",
        "_executor",
        "_max_workers",
    )

    _executor: Executor | None

    def __init__(self, max_workers: int | None, workers: str) -> None:
        Resource.__init__(self)
        if max_workers is not None and max_workers <= 0:
            msg = f"max_workers must be a number of {workers} > 0, not {max_workers!r}"
            raise ValueError(msg)
        self._max_workers = max_workers
        self._executor = None
        self._cancel_futures: bool | None = None  # the choice of close(), if called
        self._closing = False
        self._collected = False

    def _collecting(self) -> None:
        # The collector may run in a thread the release would wait for (a task,
        # a process pool's manager), or while a task waits for the collecting
        # thread; and nobody can wait for the results any more: the release joins
        # nothing, and a process pool's workers stop at once.
        self._collected = True

    def submit(
        self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs
    ) -> Future[T]:
        """Schedule ``fn(*args, **kwargs)`` and return its ``Future``."""
        executor = self._require(self._executor)
        try:
            return executor.submit(fn, *args, **kwargs)
        except RuntimeError as error:
            self._raise_if_closing(error)
            raise

    def map(
        self,
        fn: Callable[..., T],
        *iterables: Iterable[Any],
        timeout: float | None = None,
        chunksize: int = 1,
    ) -> Iterator[T]:
        """Submit ``fn`` for each item at once; iterate over the results in order.

        *timeout* bounds the wait for all the results, counted from this call
        (``TimeoutError``); ``None`` waits for ever.  A timeout that is negative,
        NaN or above ``threading.TIMEOUT_MAX`` (infinity included) raises
        ``ValueError``, and one that is not an ``int`` or a ``float`` (``True``
        included) ``TypeError``, before any task is submitted.  *chunksize* items
        go to a worker process at a time; threads take them one by one, as
        ``ThreadPoolExecutor.map`` does.
        """
        timeout = checked_timeout(timeout, threading.TIMEOUT_MAX, FROM_0_TO_TIMEOUT_MAX)
        executor = self._require(self._executor)
        try:
            return executor.map(fn, *iterables, timeout=timeout, chunksize=chunksize)
        except RuntimeError as error:
            self._raise_if_closing(error)
            raise

    def close(self, *, cancel_futures: bool = False) -> None:
        """Shut the pool down and join its workers.

        Waits for every submitted task, or only for the running ones if
        *cancel_futures* is true (the others are cancelled).  If the wait is
        interrupted, pending tasks are cancelled before the exception propagates,
        and the pool stays open for another ``close()`` to join the workers.
        Calling it again, or before entry, does nothing.  Called from a thread
        that it would wait for (a task of a thread pool, a future's callback in
        a process pool), it raises ``RuntimeError`` and changes nothing.
        """
        if not self._acquired_elsewhere() and self._waits_for_caller():
            msg = f"{self!r}: close() would wait for the thread that calls it"
            raise RuntimeError(msg)
        try:
            self._cancel_futures = cancel_futures
            super().close()
        finally:
            self._cancel_futures = None

    def _waits_for_caller(self) -> bool:
        """Whether closing would wait for the calling thread (the subclass knows).

        A method of its own: the traceback of the refusal keeps no executor alive.
        """
        msg = f"{type(self).__name__} defines no _waits_for_caller()"
        raise NotImplementedError(msg)

    def _cancels(self, *, succeeded: bool) -> bool:
        """Whether the release cancels pending tasks: ``close()``'s, or a failure."""
        cancel = self._cancel_futures
        return not succeeded if cancel is None else cancel

    def _raise_if_closing(self, error: RuntimeError) -> None:
        """Raise ``ClosedResourceError`` for the executor's refusal to schedule."""
        if self._closing:  # a close() in another thread shut the executor down
            state = "is closed" if self.closed else "is being closed"
            raise ClosedResourceError(f"{self!r} {state}") from error
