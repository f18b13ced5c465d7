"""The stress tier's asynchronous half: random misuse of the asyncio classes.

``stress`` holds the rest; this module adds what only an asynchronous class
needs (``async with``, ``aclose()``, awaited uses), so that a project without
one never imports it.
"""

from __future__ import annotations

import asyncio
import functools
from typing import TYPE_CHECKING, Any, ClassVar

import pytest

from .errors import ClosedResourceError, ReentryError
from .stress import (
    Case,
    Figures,
    Player,
    Running,
    Step,
    StressTests,
    _BodyError,
    running,
)

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Iterator, Mapping
    from contextlib import ExitStack
    from pathlib import Path

__all__ = ["AsyncPlayer", "AsyncStressTests", "aplay", "async_case", "in_loop"]


async def _araises(expected: type[BaseException], call: Callable[[], Any]) -> None:
    try:
        await call()
    except expected:
        return
    pytest.fail(f"expected {expected.__name__}")


class AsyncPlayer(Player):
    """``Player`` for an async class: ``async with``, ``aclose()``, awaited uses."""

    async def aplay(self, steps: list[Step]) -> tuple[Any, bool, list[str]]:
        for kind, inner, raising in steps:
            self.count(kind)
            if kind == "close":
                await self.obj.aclose()
            elif kind == "use":
                await self.ause()
            elif kind == "early":
                await self.aearly()
            elif self.state != "new":
                with pytest.raises(ReentryError):
                    async with self.obj:
                        pytest.fail("the body of a second async with ran")
            elif raising:
                error = _BodyError()
                with pytest.raises(_BodyError) as raised:
                    await self.ablock(inner, error)
                if raised.value is not error:
                    raise AssertionError("the body's exception was replaced")
            else:
                await self.ablock(inner, None)
        await self.obj.aclose()
        await self.obj.aclose()
        return self.obj, self.state != "new", self.log

    async def ablock(self, inner: tuple[str, ...], error: _BodyError | None) -> None:
        try:
            async with self.obj:
                self.state = "open"
                for step in inner:
                    self.count(step)
                    if step == "use":
                        await self.ause()
                    elif step == "reenter":
                        with pytest.raises(ReentryError):
                            async with self.obj:
                                pytest.fail("the body of a nested async with ran")
                    elif step == "close":
                        await self.obj.aclose()
                        self.closed_early("close")
                    else:
                        await self.aearly()
                if error is not None:
                    raise error
        finally:
            self.ended(raising=error is not None)

    async def ause(self) -> None:
        use = self.case.use
        if use is None:
            return
        if self.state == "open" or not self.case.guarded:
            await use(self.obj)
            self.log.append("use" if self.state == "open" else "use-outside")
        else:
            await _araises(ClosedResourceError, functools.partial(use, self.obj))

    async def aearly(self) -> None:
        early = self.case.early
        if early is None:
            return
        if self.state == "open":
            await early(self.obj)
            self.closed_early("early")
        else:
            await _araises(ClosedResourceError, functools.partial(early, self.obj))


def in_loop(
    function: Callable[[Any], object],
) -> Callable[[Any], Awaitable[object]]:
    """*function* as a coroutine function, for the async cases."""

    async def call(obj: object) -> object:
        return function(obj)

    return call


def aplay(case: Case, steps: list[Step]) -> tuple[Any, bool, list[str]]:
    """Play *steps* on a new object of an asynchronous *case*, in an event loop."""
    return asyncio.run(AsyncPlayer(case).aplay(steps))


class AsyncStressTests(StressTests):
    """``StressTests`` with the asyncio classes: ``async_cases``, as ``cases``."""

    async_cases: ClassVar[Mapping[str, tuple[type, Callable[[Path, ExitStack], Case]]]]

    def test_random_async_sequences_keep_the_contract(
        self, async_case: Running
    ) -> None:
        async_case.play_random()


@pytest.fixture
def async_case(
    request: pytest.FixtureRequest, tmp_path: Path, figures: Figures
) -> Iterator[Running]:
    """The class of the test class's ``async_cases`` that the parameter names."""
    cases = request.cls.async_cases
    yield from running(request.param, tmp_path, figures, cases, aplay)
