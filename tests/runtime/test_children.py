"""``children``: the tools that fork inside a block, or signal at one point."""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
import warnings
from typing import TYPE_CHECKING

import pytest
from _runtime import children

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable, Iterator
    from types import CodeType


def _fails() -> None:
    msg = "in the child"
    raise ValueError(msg)


def _warns() -> None:
    warnings.warn("in the child", ResourceWarning, stacklevel=1)


def test_run_in_child_passes_when_nothing_went_wrong() -> None:
    children.run_in_child(lambda: None)


@pytest.mark.parametrize("function", [_fails, _warns])
def test_run_in_child_fails_when_the_child_raised_or_warned(
    function: Callable[[], None],
) -> None:
    with pytest.raises(AssertionError, match="in the child"):
        children.run_in_child(function)


@pytest.mark.parametrize("raising", [False, True])
def test_left_in_child_lets_the_child_leave_the_block_first(raising: bool) -> None:
    events: list[str] = []

    @contextlib.contextmanager
    def block() -> Iterator[list[str]]:
        yield events
        events.append("left")

    with children.left_in_child(block(), raising=raising) as got:
        assert got is events
        assert events == []  # the child's exit happened in the child only
    assert events == ["left"]


def test_left_in_child_fails_when_the_block_swallowed_the_childs_exception() -> None:
    swallowing = contextlib.suppress(children.LeftInChild)
    with pytest.raises(AssertionError, match="swallowed LeftInChild"):  # noqa: SIM117
        with children.left_in_child(swallowing, raising=True):
            pass


def test_left_in_child_fails_when_then_raised() -> None:
    with (
        pytest.raises(AssertionError, match="in the child"),
        children.left_in_child(
            contextlib.nullcontext(), raising=False, then=lambda _: _fails()
        ),
    ):
        pass


def test_async_left_in_child_lets_the_child_leave_the_block_first() -> None:
    import asyncio  # noqa: PLC0415 - only here

    @contextlib.asynccontextmanager
    async def block() -> AsyncIterator[int]:
        yield 1

    async def main() -> None:
        async with children.async_left_in_child(block(), raising=True) as got:
            assert got == 1

    asyncio.run(main())


def _two_lines(calls: list[int]) -> None:
    calls.append(0)
    calls.append(1)


@pytest.mark.parametrize(("signum", "error"), children.RAISING_SIGNALS)
def test_signal_at_line_raises_at_that_line(
    signum: int, error: type[BaseException]
) -> None:
    calls: list[int] = []
    code = _two_lines.__code__
    with (
        pytest.raises(error),
        children.raising_handler(signum, error),
        children.signal_at_line(code, code.co_firstlineno + 2, signum) as fired,
    ):
        _two_lines(calls)
    assert fired == [True]
    assert calls == [0]
    assert signal.getsignal(signum) is not None


def test_raising_handler_puts_the_previous_handler_back() -> None:
    previous = signal.getsignal(signal.SIGALRM)
    seen: list[int] = []
    with (
        pytest.raises(KeyboardInterrupt),
        children.raising_handler(signal.SIGALRM, KeyboardInterrupt, seen),
    ):
        signal.raise_signal(signal.SIGALRM)
    assert seen == [signal.SIGALRM]
    assert signal.getsignal(signal.SIGALRM) is previous


def test_signal_at_c_return_raises_as_that_function_returns() -> None:
    with (
        pytest.raises(KeyboardInterrupt),
        children.raising_handler(signal.SIGALRM, KeyboardInterrupt),
        children.signal_at_c_return("getrecursionlimit", signal.SIGALRM) as fired,
    ):
        sys.getrecursionlimit()
    assert fired == [True]


def _waits() -> None:
    import time  # noqa: PLC0415 - only here

    time.sleep(5.0)


def test_sigint_once_in_interrupts_the_function_it_names(
    sigint_once_in: Callable[[CodeType], None],
) -> None:
    sigint_once_in(_waits.__code__)
    with pytest.raises(KeyboardInterrupt):
        _waits()


def test_in_another_thread_hands_back_what_the_call_raised() -> None:
    threads: list[str] = []

    def record_and_raise() -> None:
        threads.append(threading.current_thread().name)
        raise KeyboardInterrupt

    [raised] = children.in_another_thread(record_and_raise)
    assert isinstance(raised, KeyboardInterrupt)
    assert threads == ["in_another_thread"]
    assert children.in_another_thread(threads.clear) == []
    assert threads == []


def test_in_another_thread_fails_the_test_when_the_thread_hangs() -> None:
    release = threading.Event()
    try:
        with pytest.raises(pytest.fail.Exception, match=r"still ran .* after 0\.1 s"):
            children.in_another_thread(release.wait, timeout=0.1)
    finally:
        release.set()
