"""The contract of ``_resource`` for ``async with``, written once.

``AsyncResource`` follows trio's rules (``aclose()`` is idempotent, and a
cancelled close still closes); ``ThreadedResource`` makes an ``AsyncResource`` of
a ``Resource`` whose blocking calls run in worker threads.  Only asynchronous
classes import this module: it imports ``asyncio``.
"""

from __future__ import annotations

import asyncio
import functools
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from . import _resource
from ._cleanup import raise_unless_noted
from ._resource import CLOSED, NEW, Lifecycle, Resource
from .errors import ReentryError

if TYPE_CHECKING:
    from collections.abc import Callable
    from types import TracebackType

__all__ = [
    "AsyncResource",
    "ThreadedResource",
    "run_in_thread",
    "wait_despite_cancel",
]

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)
SyncT = TypeVar("SyncT", bound=Resource[Any])


async def wait_despite_cancel(
    future: asyncio.Future[Any], on_cancel: Callable[[], object] | None = None
) -> asyncio.CancelledError | None:
    """Wait until *future* is done, even if the awaiting task is cancelled.

    A thread cannot be stopped, and what it returns (an open file, a connection)
    must not be lost: cancellations are absorbed while it runs, and the first one
    is returned for the caller to re-raise once it has dealt with the result.
    *on_cancel* is called at the first cancellation, to hurry *future* along.
    """
    cancelled: asyncio.CancelledError | None = None
    while not future.done():
        try:
            await asyncio.wait((future,))
        except asyncio.CancelledError as error:
            if cancelled is None and on_cancel is not None:
                on_cancel()
            cancelled = cancelled or error
    return cancelled


async def run_in_thread(function: Callable[..., T], *args: object) -> T:
    """Run ``function(*args)`` in the loop's default executor and return its result.

    If the awaiting task is cancelled, the call still completes before
    ``CancelledError`` is re-raised, and its result is dropped: *function* must
    record what it acquires on an object that releases it.  An exception it
    raised becomes the ``CancelledError``'s context (asyncio would otherwise log
    it as never retrieved).
    """
    future = asyncio.get_running_loop().run_in_executor(None, function, *args)
    cancelled = await wait_despite_cancel(future)
    if cancelled is not None:
        if not future.cancelled() and (error := future.exception()) is not None:
            cancelled.__context__ = error
        raise cancelled
    return future.result()


class AsyncResource(Lifecycle, Generic[T_co]):
    """Base class of a single-use asynchronous context manager.

    The asynchronous twin of ``Resource``, on the same ``Lifecycle``: a subclass
    calls ``AsyncResource.__init__(self)`` first in its ``__init__``, implements
    ``async _acquire()`` and ``async _release(succeeded)`` under the same rules
    (and may implement ``_block_raised(exc)``), and ``_release_now()``, which
    releases synchronously what it can for the collection finalizer (which
    cannot await) and returns whether it did.

    ``_release`` runs as a task of its own that a cancellation of the caller does
    not stop: ``aclose()``, and the exit of a cancelled block, wait for it to
    finish and then re-raise ``CancelledError`` (with a release failure attached
    as a note), so a cancelled close still closes.  At the first cancellation
    ``_abort()`` runs, for a release that must turn forceful to end soon (a
    socket that would wait for its peer); by default it does nothing.
    ``aclose()`` may be awaited any number of times; a second one while the first
    is releasing waits for the same release.

    In a process forked inside the block (see ``Resource``), the block's end,
    ``aclose()`` and collection call ``_release_copy()`` instead, synchronously,
    and await nothing: the child's event loop is a copy of the parent's, whose
    selector (an epoll instance on Linux) the two processes share, so that a
    descriptor the child unregistered would stop being watched in the parent
    too.  By default it releases nothing.
    """

    __slots__ = ("_releasing",)

    def __init__(self) -> None:
        Lifecycle.__init__(self)
        self._releasing: asyncio.Future[None] | None = None

    async def _acquire(self) -> T_co:
        """Acquire the resource: the subclass's part (see the class docstring)."""
        msg = f"{type(self).__name__} defines no _acquire()"
        raise NotImplementedError(msg)

    async def _release(self, *, succeeded: bool) -> None:
        """Release what is recorded: the subclass's part (see the class docstring)."""
        msg = f"{type(self).__name__} defines no _release()"
        raise NotImplementedError(msg)

    def _release_now(self) -> bool:
        """Release synchronously what can be; return whether it was released."""
        return False

    def _abort(self) -> None:
        """Make a release under way end soon; called when its caller is cancelled."""

    async def __aenter__(self) -> T_co:
        if self._state is not NEW:
            raise ReentryError(self)
        self._state = _resource.OPENING  # this process's: the record (Resource)
        try:
            value = await self._acquire()
        except BaseException as error:
            await self._finish(error, succeeded=False)
            raise
        self._state = _resource.OPEN
        return value

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self._held_here(exc):
            if exc is not None:
                self._block_raised(exc)
            await self._finish(exc, succeeded=exc is None)

    def _release_at_collection(self) -> str:
        released = self._release_now()
        self._state = CLOSED
        if released:
            return ": released at collection"
        return ": its release was never awaited"

    async def aclose(self) -> None:
        """Release the resource now; awaiting it again, or before entry, does nothing.

        If the awaiting task is cancelled, the release still completes before
        ``CancelledError`` is re-raised.
        """
        if self._held_here(None):
            await self._finish(None, succeeded=False)

    def _close_now(self) -> None:
        """Release at once with ``_release_now()`` (for a release that never waits)."""
        if self._held_here(None):
            self._release_now()
            self._state = CLOSED

    async def _finish(self, primary: BaseException | None, *, succeeded: bool) -> None:
        releasing = self._releasing
        if releasing is None:
            releasing = asyncio.ensure_future(self._release(succeeded=succeeded))
            self._releasing = releasing
        cancelled = await wait_despite_cancel(releasing, self._abort)
        self._releasing = None
        if releasing.cancelled():
            error: BaseException | None = asyncio.CancelledError()
        else:
            error = releasing.exception()
        if error is None or isinstance(error, Exception):
            self._state = CLOSED
        if error is not None:
            try:  # a cancellation of the caller wins over a failed release
                raise_unless_noted(error, self, primary or cancelled)
            finally:
                del error
        if cancelled is not None and cancelled is not primary:
            raise cancelled


class ThreadedResource(AsyncResource[T_co], Generic[T_co, SyncT]):
    """An ``AsyncResource`` made of a ``Resource`` whose calls block.

    Acquiring enters the synchronous resource, its twin, in a worker thread and
    releasing closes it in one (its exit, when the block succeeded; a subclass
    may override ``_release_in_thread``), so the event loop is never blocked.
    Without a thread to release in (the loop's executor was shut down), it
    closes in place.  A cancelled acquisition waits for the thread and then
    releases what it acquired; collected while held, it is closed in the
    collecting thread.  The exit of a block that raised passes the exception on
    to the twin's ``_block_raised``.  In a process forked inside the block, the
    twin is closed in place, where its own ``_release_copy()`` runs.

    A subclass calls ``ThreadedResource.__init__(self, twin)`` first in its
    ``__init__``, and reaches the twin only through its public and protected
    interface: ``_twin()`` while the block runs.  Its ``repr`` is the twin's,
    under its own class name.
    """

    __slots__ = ("_sync",)

    def __init__(self, sync: SyncT) -> None:
        AsyncResource.__init__(self)
        self._sync = sync

    def __repr__(self) -> str:
        twin, name = repr(self._sync), type(self._sync).__name__
        if twin.startswith(f"{name}("):
            return f"{type(self).__name__}{twin.removeprefix(name)}"
        return f"{type(self).__name__}({twin})"

    def _twin(self) -> SyncT:
        """The synchronous twin; ``ClosedResourceError`` unless this object is held."""
        return self._require(self._sync)

    async def _enter_sync(self) -> None:
        """Enter the synchronous resource in a worker thread."""
        await run_in_thread(self._sync.__enter__)

    async def _release(self, *, succeeded: bool) -> None:
        release = functools.partial(self._release_in_thread, succeeded=succeeded)
        try:
            releasing = asyncio.get_running_loop().run_in_executor(None, release)
        except BaseException:  # no thread to release in (executor shut down)
            self._release_now()
            raise
        await releasing

    def _block_raised(self, exc: BaseException) -> None:
        self._sync._block_raised(exc)

    def _release_in_thread(self, *, succeeded: bool) -> None:
        """Release the synchronous resource; runs in a worker thread."""
        if succeeded:
            self._sync.__exit__(None, None, None)
        else:
            self._sync.close()

    def _release_now(self) -> bool:
        self._sync.close()
        return True

    def _release_copy(self) -> None:
        self._sync.close()
