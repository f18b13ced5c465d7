"""The contract of ``_resource`` for ``async with``, written once.

``AsyncResource`` follows trio's rules (``aclose()`` is idempotent, and a
cancelled close still closes); ``ThreadedResource`` makes an ``AsyncResource`` of
a ``Resource`` whose blocking calls run in worker threads.  Only asynchronous
classes import this module: it imports ``asyncio``.
"""

from __future__ import annotations

import asyncio
import functools
import warnings
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from . import _resource
from ._cleanup import raise_unless_noted
from ._resource import (
    _MISUSE,
    CLOSED,
    HELD,
    NEW,
    Resource,
    tracked_resource,
)
from .errors import ClosedResourceError, ReentryError

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
V = TypeVar("V")


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


@tracked_resource
class AsyncResource(Generic[T_co]):
    """Base class of a single-use asynchronous context manager.

    The asynchronous twin of ``Resource``: a subclass implements ``async
    _acquire()`` and ``async _release(succeeded)`` under the same rules (and may
    implement ``_block_raised(exc)``), and ``_release_now()``, which releases
    synchronously what it can for the collection finalizer (which cannot await)
    and returns whether it did.

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

    __slots__ = ("_releasing", "_state")

    def __init__(self) -> None:
        self._state = NEW
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
        return False

    def _abort(self) -> None:
        """Make a release under way end soon; called when its caller is cancelled."""

    def _block_raised(self, exc: BaseException) -> None:
        """Called by the exit of a block that raised *exc*, before the release."""

    def _release_copy(self) -> None:
        """Release this process's copy, in a process forked inside the block.

        Synchronous, and it must not touch the event loop (see the class
        docstring).  By default it releases nothing.
        """

    async def __aenter__(self) -> T_co:
        if self._state != NEW:
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
        if self._state in HELD:
            if self._acquired_elsewhere():  # in a process forked inside the block
                self._disown(exc)
                return
            if exc is not None:
                self._block_raised(exc)
            await self._finish(exc, succeeded=exc is None)

    def __del__(self, _warn: Callable[..., None] = warnings.warn) -> None:
        try:
            state = self._state
        except AttributeError:  # __init__ failed before AsyncResource.__init__ ran
            return
        if state not in HELD:
            return
        if self._acquired_elsewhere():  # a copy in a forked child: not a leak
            self._disown(None)
            return
        released = self._release_now()
        self._state = CLOSED
        how = "released at collection" if released else "its release was never awaited"
        _warn(f"unclosed {self!r}: {how}", ResourceWarning, stacklevel=2, source=self)

    @property
    def closed(self) -> bool:
        """Whether the resource has been released."""
        return self._state == CLOSED

    async def aclose(self) -> None:
        """Release the resource now; awaiting it again, or before entry, does nothing.

        If the awaiting task is cancelled, the release still completes before
        ``CancelledError`` is re-raised.
        """
        if self._state in HELD:
            if self._acquired_elsewhere():  # in a process forked inside the block
                self._disown(None)
                return
            await self._finish(None, succeeded=False)

    def _require(self, value: V | None) -> V:
        """Return *value*, a piece of the resource, or raise if it is not held."""
        if value is None or self._state != _resource.OPEN:
            state = _MISUSE.get(self._state, "is closed")
            raise ClosedResourceError(f"{self!r} {state}")
        return value

    def _close_now(self) -> None:
        """Release at once with ``_release_now()`` (for a release that never waits)."""
        if self._state in HELD:
            if self._acquired_elsewhere():  # in a process forked inside the block
                self._disown(None)
                return
            self._release_now()
            self._state = CLOSED

    def _acquired_elsewhere(self) -> bool:
        """Whether another process acquired what this object holds (``Resource``'s)."""
        state = self._state
        own = (_resource.OPEN, _resource.OPENING)
        return state in HELD and state is not own[0] and state is not own[1]

    def _disown(self, primary: BaseException | None) -> None:
        """Close the object in this process, which did not acquire: its copy only."""
        self._state = CLOSED
        try:
            self._release_copy()
        except BaseException as error:  # noqa: BLE001 - raise_unless_noted raises it
            raise_unless_noted(error, self, primary)

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


class ThreadedResource(AsyncResource[T_co]):
    """An ``AsyncResource`` made of a ``Resource`` whose calls block.

    Acquiring enters the synchronous resource in a worker thread and releasing
    closes it in one (its exit, when the block succeeded; a subclass may override
    ``_release_in_thread``), so the event loop is never blocked.  Without a thread
    to release in (the loop's executor was shut down), it closes in place.  A
    cancelled acquisition waits for the thread and then releases what it
    acquired; collected while held, it is closed in the collecting thread.  The
    exit of a block that raised passes the exception on to the synchronous
    resource's ``_block_raised``.  In a process forked inside the block, the
    synchronous resource is closed in place, where its own ``_release_copy()``
    runs.
    """

    __slots__ = ("_sync",)

    def __init__(self, sync: Resource[Any]) -> None:
        super().__init__()
        self._sync = sync

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
