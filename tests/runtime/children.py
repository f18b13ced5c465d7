"""fork(): a child that leaves a block of its parent's.

The generated projects' ``tests/conftest.py`` carries the same tools for the
resources' tests; the runtime's suite imports them from here.
"""

from __future__ import annotations

import contextlib
import gc
import os
import select
import signal
import sys
import time
import traceback
import warnings
from typing import TYPE_CHECKING, NoReturn, TypeVar

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable, Iterator
    from contextlib import AbstractAsyncContextManager, AbstractContextManager

_T = TypeVar("_T")


class LeftInChild(Exception):  # noqa: N818 - what the child raises, not an error
    """Raised by a child forked inside a block, to leave that block by an exception."""


def _fork() -> int:
    """``os.fork()``, without the warning for the threads of the parent.

    From Python 3.12 ``os.fork()`` warns (``DeprecationWarning``) in a process
    that runs other threads, such as pytest-xdist's worker or a pool under
    test; raised as an error, it would come after the child was made.  The
    child only runs the test's few lines in the forking thread and ends with
    ``os._exit()``: none of the locks those threads may hold is taken there.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return os.fork()


class _ChildRecord(list[str]):
    """In the child: what went wrong, warnings and unraisable errors included.

    The filters and the hook it puts in are never put back: the child ends with
    ``os._exit()``.
    """

    def __init__(self) -> None:
        super().__init__()
        self._caught = warnings.catch_warnings(record=True).__enter__()
        warnings.simplefilter("always")
        sys.unraisablehook = lambda raised: self.append(
            f"unraisable in {raised.object!r}: {raised.exc_value!r}"
        )

    def end(self, report: int) -> NoReturn:
        """Collect garbage, then end the child: 0 if nothing went wrong, else 1."""
        gc.collect()  # the finalizers of what the child dropped, in the child
        found = [*self, *(f"{w.category.__name__}: {w.message}" for w in self._caught)]
        try:
            with contextlib.suppress(OSError):
                os.write(report, "\n".join(found).encode()[:60_000])
        finally:
            os._exit(1 if found else 0)  # never back into pytest


def _wait_for_child(pid: int, report: int) -> None:
    """Fail the test unless the child *pid* ended with status 0, within 30 s."""
    story = b""
    deadline = time.monotonic() + 30.0
    try:
        while (left := deadline - time.monotonic()) > 0:
            if select.select([report], [], [], left)[0]:
                chunk = os.read(report, 65536)
                if not chunk:
                    break
                story += chunk
        else:
            os.kill(pid, signal.SIGKILL)
    finally:
        os.close(report)
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    assert code == 0, f"the forked child ended with {code}:\n{story.decode()}"


def run_in_child(function: Callable[[], object]) -> None:
    """Run *function* in a process forked here; fail if it raised or warned there.

    The child then collects its garbage, so that a finalizer that warns or fails
    there (a ``ResourceWarning``, an unraisable error) fails the test too, and
    ends with ``os._exit()``, never returning into pytest.
    """
    read_end, write_end = os.pipe()
    pid = _fork()
    if pid == 0:
        os.close(read_end)
        record = _ChildRecord()
        try:
            function()
        except BaseException:  # noqa: BLE001 - reported to the parent
            record.append(traceback.format_exc())
        record.end(write_end)
    os.close(write_end)
    _wait_for_child(pid, read_end)


@contextlib.contextmanager
def left_in_child(
    manager: AbstractContextManager[_T],
    *,
    raising: bool,
    before: Callable[[_T], object] | None = None,
    inside: Callable[[_T], object] | None = None,
    then: Callable[[_T], object] | None = None,
) -> Iterator[_T]:
    """Enter *manager*, fork in its block, and let the child leave the block first.

    *before* runs in the block, with what the block got, before the fork.  The
    child runs *inside* in the block, leaves the block (a real ``with``)
    normally, or by raising ``LeftInChild`` if *raising*, then runs *then*, and
    ends as ``run_in_child``'s child does: the test fails if anything raised
    there (the block's end included), or warned.  The parent waits for the
    child, then yields what its block got: the test checks the parent's
    resource, and the parent's block ends when the test's does.
    """
    read_end, write_end = os.pipe()
    pid = -1
    record: _ChildRecord | None = None
    try:
        with manager as entered:
            if before is not None:
                before(entered)
            pid = _fork()
            if pid == 0:
                os.close(read_end)
                record = _ChildRecord()
                if inside is not None:
                    inside(entered)
                if raising:
                    raise LeftInChild  # noqa: TRY301 - out of the block
            else:
                os.close(write_end)
                _wait_for_child(pid, read_end)
                yield entered
    except BaseException as error:
        if pid != 0:
            raise
        if record is None:
            record = _ChildRecord()
        if not (raising and isinstance(error, LeftInChild)):
            record.append(traceback.format_exc())
    else:
        if pid == 0 and raising:
            assert record is not None  # made as the block started in the child
            record.append("the block's end swallowed LeftInChild")
    if pid == 0:
        assert record is not None
        _finish_child(record, then, entered, write_end)


@contextlib.asynccontextmanager
async def async_left_in_child(
    manager: AbstractAsyncContextManager[_T],
    *,
    raising: bool,
    before: Callable[[_T], object] | None = None,
    inside: Callable[[_T], object] | None = None,
    then: Callable[[_T], object] | None = None,
) -> AsyncIterator[_T]:
    """``left_in_child`` for ``async with``: the child leaves without awaiting.

    The child never goes back to the event loop, whose selector it shares with
    the parent: if the block's end suspended in the child, the child would hang,
    and the parent's wait fails the test after 30 s.
    """
    read_end, write_end = os.pipe()
    pid = -1
    record: _ChildRecord | None = None
    try:
        async with manager as entered:
            if before is not None:
                before(entered)
            pid = _fork()
            if pid == 0:
                os.close(read_end)
                record = _ChildRecord()
                if inside is not None:
                    inside(entered)
                if raising:
                    raise LeftInChild  # noqa: TRY301 - out of the block
            else:
                os.close(write_end)
                _wait_for_child(pid, read_end)
                yield entered
    except BaseException as error:
        if pid != 0:
            raise
        if record is None:
            record = _ChildRecord()
        if not (raising and isinstance(error, LeftInChild)):
            record.append(traceback.format_exc())
    else:
        if pid == 0 and raising:
            assert record is not None  # made as the block started in the child
            record.append("the block's end swallowed LeftInChild")
    if pid == 0:
        assert record is not None
        _finish_child(record, then, entered, write_end)


def _finish_child(
    record: _ChildRecord,
    then: Callable[[_T], object] | None,
    entered: _T,
    report: int,
) -> NoReturn:
    try:
        if then is not None:
            then(entered)
    except BaseException:  # noqa: BLE001 - reported to the parent
        record.append(traceback.format_exc())
    record.end(report)
