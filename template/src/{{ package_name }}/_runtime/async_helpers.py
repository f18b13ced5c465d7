"""The helpers of ``helpers`` for ``async with``.

Only asynchronous code imports this module: it imports ``asyncio`` through
``_async_resource``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ParamSpec, TypeVar

from . import _resource
from ._async_resource import AsyncResource
from ._resource import tracked_resource
from .helpers import _CleanupStackBase, _owned, _ThingAndMethod

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable
    from contextlib import AbstractAsyncContextManager
    from types import TracebackType
    from typing import Self

__all__ = ["AsyncCleanupStack", "AsyncClosingWith"]

T = TypeVar("T")
R = TypeVar("R")
P = ParamSpec("P")


class AsyncClosingWith(_ThingAndMethod[T], AsyncResource[T]):
    """Async context manager that awaits a release method of *thing* at the end.

    ``contextlib.aclosing(thing)`` only knows ``await thing.aclose()``; this one
    awaits the coroutine method named *method* (``"aclose"`` by default), with the
    extra *args* and *kwargs*.

    Example:
        ```python
        async with AsyncClosingWith(client, "disconnect") as connected:
            await connected.send(message)
        ```

    Plain-contextlib equivalent: ``aclosing``, or an ``@asynccontextmanager``
    generator that skips the release when the block raises unless its ``yield``
    is in a ``try``/``finally``.  The method is awaited once on every way out; the
    block's exception propagates, with a failure of the method attached as a note.
    The method runs as a task of its own: if the awaiting task is cancelled
    during the release, the method is still awaited to its end, and then
    ``CancelledError`` is re-raised (trio's rule: a cancelled close still closes);
    bound a method that can hang with a timeout of its own.  It is never awaited
    twice.  Single-use.

    Like ``ClosingWith``, the object owns *thing* from its creation: ``aclose()``
    awaits the method, also before the block (which then can no longer be
    entered: ``ReentryError``), and may be awaited any number of times; an object
    garbage-collected before its block has ended, entered or not, emits a
    ``ResourceWarning``, but cannot await the release.

    In a process forked inside the block, the method is not awaited: *thing*
    belongs to the process that entered (``ClosingWith``'s rule).
    """

    __slots__ = ("_creator", "_method", "_release_call", "_thing")

    def __init__(
        self, thing: T, method: str = "aclose", /, *args: object, **kwargs: object
    ) -> None:
        AsyncResource.__init__(self)
        # Owned from the last store on: before it, dropping the object drops *thing*.
        self._thing, self._method, self._creator, self._release_call = _owned(
            thing, method, args, kwargs
        )

    async def _acquire(self) -> T:
        return self._thing

    async def _release(self, *, succeeded: bool) -> None:
        await self._release_call()

    async def aclose(self) -> None:
        """Await the release method now, before the block too; again, do nothing.

        If the awaiting task is cancelled, the release still completes before
        ``CancelledError`` is re-raised.
        """
        self._own_unentered()
        await AsyncResource.aclose(self)


@tracked_resource
class AsyncCleanupStack(_CleanupStackBase):
    """Async context manager that runs every registered cleanup, last first.

    ``CleanupStack`` for ``async with``: ``enter()`` takes a context manager,
    ``enter_async()`` an async one, ``callback()`` a function and
    ``async_callback()`` a coroutine function.

    Example:
        ```python
        async with AsyncCleanupStack() as stack:
            conn = await stack.enter_async(AsyncTCPClient(host, port))
            stack.callback(log.info, "done")
        ```

    Plain-contextlib equivalent: ``contextlib.AsyncExitStack``, without its traps:
    every cleanup runs and sees the block's own exception, which keeps
    propagating with each cleanup failure attached as a note; without one, the
    failures are raised together as an ``ExceptionGroup``.  A cancelled
    ``aclose()`` (or a cancelled exit) still runs every remaining cleanup, then
    re-raises ``CancelledError``: an interrupt is never hidden in a group.
    Garbage-collected with pending cleanups, it runs the synchronous ones and
    warns that the asynchronous ones could not be awaited.  Single-use.  In a
    process forked inside the block, only the cleanups registered there run
    (``CleanupStack``'s rule).
    """

    __slots__ = ()

    async def __aenter__(self) -> Self:
        self._open()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> bool:
        return await self._aunwind(exc)

    async def enter_async(self, manager: AbstractAsyncContextManager[T]) -> T:
        """Enter an async context manager and register its ``__aexit__``."""
        kind = "an async context manager"
        enter, exit_ = self._entry(manager, kind, "__aenter__", "__aexit__")
        value: T = await enter()
        self._cleanups.append((manager, exit_, True, _resource._PID))
        return value

    def async_callback(
        self,
        function: Callable[P, Awaitable[R]],
        /,
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> Callable[P, Awaitable[R]]:
        """Register ``await function(*args, **kwargs)`` as a cleanup; return it."""
        self._check_open()

        async def exit_(
            exc_type: type[BaseException] | None,
            exc: BaseException | None,
            traceback: TracebackType | None,
        ) -> None:
            await function(*args, **kwargs)

        self._cleanups.append((function, exit_, True, _resource._PID))
        return function

    async def aclose(self) -> None:
        """Run every pending cleanup now.  Awaiting it again does nothing."""
        await self._aunwind(None)
