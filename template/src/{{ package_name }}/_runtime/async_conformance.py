"""``check_async_resource``: ``check_resource`` for ``async with`` classes.

The same checks through ``async with`` and ``aclose()``, plus asyncio's own
ways out: a block cancelled at each of its suspension points, by
``task.cancel()`` and by an expired ``asyncio.timeout()``, must release and let
the cancellation through (trio's contract for ``aclose()``).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ._faults import _resource_warnings_raised
from ._process import _open_fds, _OrphanAdoption
from .conformance import (
    _BODY_CHECKS,
    ContractError,
    ContractReport,
    _body_errors,
    _Checker,
    _expect_closed,
    _expect_unchanged,
    _kind_of,
    _raise,
    _reused_descriptors_kept,
    _swallowed,
)
from .errors import ClosedResourceError, ReentryError

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable
    from contextlib import AbstractAsyncContextManager


async def check_async_resource(
    factory: Callable[[], AbstractAsyncContextManager[Any]],
    *,
    use: Callable[[Any], Awaitable[object]] | None = None,
    released: Callable[[], bool] | None = None,
    cancellations: bool = True,
    limit: int = 2000,
    settle: float = 1.0,
) -> ContractReport:
    """Check that the objects *factory* makes keep the async resource contract.

    The asynchronous twin of ``check_resource``, to be awaited in a running
    event loop: ``async with`` acquires and releases; an exception in the body
    propagates unchanged (the same exceptions as ``check_resource`` raises, each
    the very object); so does the ``CancelledError`` of a block cancelled in its
    body, by ``task.cancel()`` and by an ``asyncio.timeout()`` that expires
    there (swallowed, the code after the block runs although the task was
    cancelled, or the timeout expired: ``asyncio.timeout()`` raises
    ``TimeoutError`` only for a cancellation that comes out of the block); a
    second ``async with`` raises ``ReentryError``;
    ``aclose()`` may be awaited twice; *use* (awaited with the object) works in
    the block and raises ``ClosedResourceError`` after it; an object collected
    while held emits a ``ResourceWarning``.  Tasks count as held: one the object
    started must have ended when ``aclose()`` returns.  With
    *cancellations*, the task running a block is cancelled at each of its
    suspension points in turn, until the block finishes first: after each,
    ``aclose()`` leaves nothing held.  Then the same sweep runs on ``aclose()``
    alone, and a cancelled ``aclose()`` must have released everything by itself,
    as trio's resource contract requires.  In both sweeps a task cancelled
    before it finished must end with ``CancelledError``: a block or an
    ``aclose()`` that returns normally lost its cancellation.  *limit* and
    *settle* are those of ``check_resource``.
    """
    checker = _Checker(released, settle)
    with _OrphanAdoption(), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ResourceWarning)
        checker.caught = caught
        try:
            await _check_async_lifecycle(factory, use, checker)
            if cancellations:
                for phase in ("block", "aclose"):
                    checker.faults["interrupt"] += await _cancel_sweep(
                        factory, phase, limit, checker
                    )
                checker.checks.append("cancellation sweep")
        finally:
            for manager in checker.made:
                aclose = getattr(manager, "aclose", None)
                if aclose is not None:
                    with contextlib.suppress(Exception):
                        await aclose()
            checker.release_made()
    return checker.report()


async def _check_async_collection(
    factory: Callable[[], AbstractAsyncContextManager[Any]], checker: _Checker
) -> None:
    """Check that an object collected while held warns and releases."""
    held_manager = factory()
    await type(held_manager).__aenter__(held_manager)
    del held_manager
    checker.collected_warns()
    await asyncio.sleep(0)
    await checker.aheld("an object collected while held", tasks_at_once=False)
    with _resource_warnings_raised():
        held_manager = factory()
        await type(held_manager).__aenter__(held_manager)
        del held_manager
        gc.collect()
    await asyncio.sleep(0)
    what = "an object collected while held, with ResourceWarning an error"
    await checker.aheld(what, tasks_at_once=False)


async def _check_async_body_errors(
    factory: Callable[[], AbstractAsyncContextManager[Any]], checker: _Checker
) -> None:
    """``_check_body_errors`` for ``async with``, and a block cancelled two ways."""
    for error in _body_errors():
        manager = checker.make(factory)
        try:
            async with manager:
                _raise(error)
        except BaseException as raised:  # noqa: BLE001 - each must come out
            _expect_unchanged(error, raised)
        else:
            raise ContractError(_swallowed(error, "the code after the block ran"))
        finally:
            error.__traceback__ = None  # its frames would keep the object alive
        _expect_closed(manager)
        await checker.aheld_at_once(f"a block that raised {_kind_of(error)}")
    checker.checks += list(_BODY_CHECKS)
    for timeout in (False, True):
        await _check_cancelled_block(factory, checker, timeout=timeout)
    checker.checks += ["cancellation in the body", "timeout in the body"]


async def _check_async_lifecycle(
    factory: Callable[[], AbstractAsyncContextManager[Any]],
    use: Callable[[Any], Awaitable[object]] | None,
    checker: _Checker,
) -> None:
    manager = checker.make(factory)
    async with manager:
        if use is not None:
            await use(manager)
        during = _open_fds()
    _expect_closed(manager)
    await checker.aheld("a plain block")
    if hasattr(manager, "aclose"):
        with _reused_descriptors_kept(during, "aclose() after the block"):
            try:
                await manager.aclose()  # the end of the block closed it: again
            except Exception as failure:
                msg = f"aclose() after the block raised {failure!r}"
                raise ContractError(msg) from failure
        checker.checks.append("aclose twice")
    if use is not None:
        try:
            await use(manager)
        except ClosedResourceError:
            checker.checks.append("use after close")
        else:
            raise ContractError("use after close raised no ClosedResourceError")
    try:
        await type(manager).__aenter__(manager)
    except ReentryError:
        checker.checks += ["async with", "re-entry after exit"]
    else:
        raise ContractError("a second async with raised no ReentryError")

    await _check_async_body_errors(factory, checker)

    await _check_async_collection(factory, checker)
    checker.checks.append("collected while held")


@dataclass
class _CancelledBlock:
    """What a block that was cancelled in its body let through."""

    entered: asyncio.Future[None]
    """Done once the body runs."""
    arrived: BaseException | None = None
    """The ``CancelledError`` that the body got."""
    out: BaseException | None = None
    """What came out of the ``async with`` statement."""
    after: bool = False
    """Whether the code after the block ran."""
    timed_out: BaseException | None = None
    """What came out of the ``asyncio.timeout()`` block around it."""


async def _wait_in_block(
    manager: AbstractAsyncContextManager[Any],
    seen: _CancelledBlock,
    scope: asyncio.Timeout | None,
) -> None:
    """Enter *manager* and wait in its body until cancelled; note what passes."""
    try:
        async with manager:
            if scope is not None:  # it expires at the next turn of the loop
                scope.reschedule(asyncio.get_running_loop().time())
            seen.entered.set_result(None)
            try:
                await asyncio.get_running_loop().create_future()  # for ever
            except BaseException as arrived:
                seen.arrived = arrived
                raise
    except BaseException as out:
        seen.out = out
        raise
    seen.after = True


async def _timed_block(
    manager: AbstractAsyncContextManager[Any], seen: _CancelledBlock
) -> None:
    """``_wait_in_block`` in an ``asyncio.timeout()`` that expires in the body."""
    try:
        async with asyncio.timeout(None) as scope:
            await _wait_in_block(manager, seen, scope)
    except BaseException as out:
        seen.timed_out = out
        raise


async def _check_cancelled_block(
    factory: Callable[[], AbstractAsyncContextManager[Any]],
    checker: _Checker,
    *,
    timeout: bool,
) -> None:
    """Cancel a block in its body, by ``task.cancel()`` or by a timeout.

    The ``CancelledError`` that the body gets must come out of the ``async
    with`` statement, the very object: an exit that swallows it lets the code
    after the block run although the task was cancelled (or the timeout
    expired), and one that replaces it turns a cancellation into an error.
    """
    manager = checker.make(factory)
    seen = _CancelledBlock(asyncio.get_running_loop().create_future())
    how = "an asyncio.timeout() that expired" if timeout else "task.cancel()"
    if timeout:
        block = _timed_block(manager, seen)
    else:
        block = _wait_in_block(manager, seen, None)
    task = asyncio.ensure_future(block)
    try:
        if not timeout:
            first = asyncio.FIRST_COMPLETED
            await asyncio.wait((task, seen.entered), return_when=first)
            task.cancel()
        await asyncio.wait((task,))
    finally:
        if not task.done():  # the checker itself was cancelled
            task.cancel()
    ended = _exception_of(task)  # retrieved: a TimeoutError, or the class's own
    arrived, out = seen.arrived, seen.out
    seen.arrived = seen.out = seen.timed_out = None
    if not isinstance(arrived, asyncio.CancelledError):
        msg = f"the block cancelled by {how} never got CancelledError in its body"
        raise ContractError(msg) from (out or ended)
    what = f"CancelledError from {how}"
    if seen.after:
        after = "the code after the block ran"
        raise ContractError(_swallowed_cancellation(what, after))
    if out is not arrived:
        msg = (
            f"the body's cancellation was replaced: {what} was raised in the block "
            f"and {out!r} came out of it (a cancellation must propagate unchanged)"
        )
        raise ContractError(msg) from out
    arrived.__traceback__ = None
    del arrived, out, ended, task, block
    _expect_closed(manager)
    await checker.aheld_at_once(f"a block cancelled by {how}")


def _swallowed_cancellation(what: str, how: str) -> str:
    return (
        f"the body's cancellation was swallowed: {what} was raised in the block and "
        f"{how} (a cancellation must propagate unchanged)"
    )


def _exception_of(task: asyncio.Future[Any]) -> BaseException | None:
    if task.cancelled():
        return None
    return task.exception()


async def _block(manager: AbstractAsyncContextManager[Any]) -> None:
    async with manager:
        await asyncio.sleep(0)


def _suspended_at(task: asyncio.Task[Any]) -> tuple[object, ...]:
    """Where each coroutine of the task's await chain stands, and what it awaits.

    What is awaited is a new object at each suspension (a future, the generator
    of an ``asyncio.sleep()``), also when a loop suspends at the same ``await``
    again: the tuple holds them, so equal tuples mean the task has not moved.
    """
    where: list[object] = []
    awaited: Any = task.get_coro()
    while awaited is not None:
        where.append(awaited)
        frame = getattr(awaited, "cr_frame", None) or getattr(awaited, "gi_frame", None)
        if frame is None:
            break
        where.append((frame.f_code, frame.f_lasti))
        awaited = getattr(awaited, "cr_await", None) or getattr(
            awaited, "gi_yieldfrom", None
        )
    return tuple(where)


async def _advance(task: asyncio.Task[Any], moves: int) -> None:
    """Let *task* start, then move between suspension points *moves* times.

    Loop iterations in which the task stays suspended where it was (waiting for
    a thread or a child) are not counted: cancelling in any of them is the same
    fault.
    """
    await asyncio.sleep(0)
    where = _suspended_at(task)
    while moves > 0 and not task.done():
        await asyncio.sleep(0)
        now = _suspended_at(task)
        if now != where:
            moves, where = moves - 1, now


async def _cancel_sweep(
    factory: Callable[[], AbstractAsyncContextManager[Any]],
    phase: str,
    limit: int,
    checker: _Checker,
) -> int:
    """Cancel *phase* at its 1st, 2nd, ... suspension point; return how many."""
    for target in range(limit):
        manager: Any = checker.make(factory)
        if phase == "aclose":
            if not hasattr(manager, "aclose"):
                return 0  # released by __aexit__ alone: the block's sweep covers it
            await type(manager).__aenter__(manager)
        task = asyncio.ensure_future(
            _block(manager) if phase == "block" else manager.aclose()
        )
        await _advance(task, target)
        finished = task.done()
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            if finished:
                msg = f"{phase} finished but raised CancelledError"
                raise ContractError(msg) from None
        else:
            if not finished:
                where = f"cancelled at suspension point {target}"
                what = "aclose()" if phase == "aclose" else "a block"
                msg = (
                    f"{what} {where} returned normally: its cancellation was "
                    "swallowed (a cancelled task must raise CancelledError)"
                )
                raise ContractError(msg)
        if phase == "block":
            aclose = getattr(manager, "aclose", None)
            if aclose is not None:
                await aclose()
        elif getattr(manager, "closed", True) is not True:
            msg = f"a cancelled aclose() did not close {manager!r}"
            raise ContractError(msg)
        del manager, task
        checker.count_finalized()
        await checker.aheld(f"{phase} cancelled at suspension point {target}")
        if finished:
            return target
    return limit
