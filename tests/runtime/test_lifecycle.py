"""What ``Resource`` and ``AsyncResource`` give every class before and after its block.

``check_resource`` proves a class's block, its close, re-entry and collection;
these are the two states it does not visit: an object closed before its block,
and one whose acquisition failed; and ``close_recorded``, with which a class
releases the descriptors it recorded.
"""

from __future__ import annotations

import asyncio
import os

import pytest
from _runtime._async_resource import AsyncResource
from _runtime._resource import Resource, close_recorded
from _runtime.errors import ClosedResourceError, ReentryError


class Held(Resource[list[str]]):
    """Holds a list; fails its acquisition if asked to."""

    __slots__ = ("_failing", "_held", "released")

    def __init__(self, *, failing: bool = False) -> None:
        Resource.__init__(self)
        self._failing = failing
        self._held: list[str] | None = None
        self.released = 0

    def __repr__(self) -> str:
        return "Held()"

    @property
    def held(self) -> list[str]:
        return self._require(self._held)

    def _acquire(self) -> list[str]:
        if self._failing:
            raise FileNotFoundError
        self._held = ["held"]
        return self._held

    def _release(self, *, succeeded: bool) -> None:
        self.released += 1
        self._held = None


class AsyncHeld(AsyncResource[list[str]]):
    """``Held`` through ``async with``."""

    __slots__ = ("_failing", "_held")

    def __init__(self, *, failing: bool = False) -> None:
        AsyncResource.__init__(self)
        self._failing = failing
        self._held: list[str] | None = None

    def __repr__(self) -> str:
        return "AsyncHeld()"

    @property
    def held(self) -> list[str]:
        return self._require(self._held)

    async def _acquire(self) -> list[str]:
        if self._failing:
            raise FileNotFoundError
        self._held = ["held"]
        return self._held

    async def _release(self, *, succeeded: bool) -> None:
        self._held = None

    def _release_now(self) -> bool:
        self._held = None
        return True


def test_close_before_entry_does_nothing() -> None:
    managed = Held()
    managed.close()
    assert not managed.closed
    assert managed.released == 0
    with pytest.raises(ClosedResourceError, match=r"Held\(\) was never entered"):
        _ = managed.held
    with managed as held:
        assert held == ["held"]
    assert managed.released == 1


def test_a_failed_acquisition_spends_the_object() -> None:
    managed = Held(failing=True)
    with pytest.raises(FileNotFoundError), managed:
        pytest.fail("the body must not run")
    assert managed.closed
    with pytest.raises(ClosedResourceError, match=r"Held\(\) is closed"):
        _ = managed.held
    with pytest.raises(ReentryError, match="Held"), managed:
        pytest.fail("the body must not run")


def test_aclose_before_entry_does_nothing() -> None:
    managed = AsyncHeld()

    async def main() -> None:
        await managed.aclose()
        assert not managed.closed
        with pytest.raises(ClosedResourceError, match="was never entered"):
            _ = managed.held
        async with managed as held:
            assert held == ["held"]
        assert managed.closed

    asyncio.run(main())


def test_a_failed_async_acquisition_spends_the_object() -> None:
    managed = AsyncHeld(failing=True)

    async def main() -> None:
        with pytest.raises(FileNotFoundError):
            async with managed:
                pytest.fail("the body must not run")
        assert managed.closed
        with pytest.raises(ClosedResourceError, match=r"AsyncHeld\(\) is closed"):
            _ = managed.held
        with pytest.raises(ReentryError, match="AsyncHeld"):
            async with managed:
                pytest.fail("the body must not run")

    asyncio.run(main())


def test_close_recorded_closes_the_last_descriptors_and_forgets_each() -> None:
    record = [os.open(os.devnull, os.O_RDONLY) for _ in range(3)]
    first = record[0]
    close_recorded(record, 2)
    assert record == [first]
    close_recorded(record)
    assert record == []
    close_recorded(record)  # nothing left: nothing to do


def test_close_recorded_stops_at_a_failed_close_and_keeps_the_rest_listed() -> None:
    kept = os.open(os.devnull, os.O_RDONLY)
    already_closed = os.open(os.devnull, os.O_RDONLY)
    os.close(already_closed)
    record = [kept, already_closed]
    with pytest.raises(OSError, match="Bad file descriptor"):
        close_recorded(record)
    assert record == [kept]  # popped and failed: forgotten; the rest still listed
    close_recorded(record)
    assert record == []
