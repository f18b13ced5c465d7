"""What ``Resource`` and ``AsyncResource`` give every class before and after its block.

``check_resource`` proves a class's block, its close, re-entry and collection;
these are the two states it does not visit: an object closed before its block,
and one whose acquisition failed; a ``close()`` that meets a release already
running; and ``close_recorded``, with which a class releases the descriptors it
recorded.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from typing import TYPE_CHECKING

import pytest
from _runtime import children
from _runtime._async_resource import AsyncResource
from _runtime._resource import Resource, close_recorded
from _runtime.errors import ClosedResourceError, ReentryError

if TYPE_CHECKING:
    from collections.abc import Callable


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


class SlowRelease(Resource[None]):
    """Its release calls ``during`` (if any), then waits for ``closing``."""

    __slots__ = ("closing", "during", "released")

    def __init__(self, during: Callable[[SlowRelease], None] | None = None) -> None:
        Resource.__init__(self)
        self.during = during
        self.closing = threading.Event()
        self.released = 0

    def __repr__(self) -> str:
        return "SlowRelease()"

    def _acquire(self) -> None:
        return None

    def _release(self, *, succeeded: bool) -> None:
        if self.during is not None:
            self.during(self)
        if self.closing.wait(10):
            time.sleep(0.05)  # the other close() is in, and would return now
        self.released += 1


@pytest.mark.parametrize("first", ["exit", "close"])
def test_close_during_another_threads_release_returns_once_it_has_ended(
    first: str,
) -> None:
    resource = SlowRelease()
    resource.__enter__()
    claimed = threading.Event()
    resource.during = lambda _: claimed.set()
    seen: list[int] = []

    def close_too() -> None:
        assert claimed.wait(10)
        resource.closing.set()
        resource.close()
        seen.append(resource.released)

    closer = threading.Thread(target=close_too)
    closer.start()
    if first == "exit":
        resource.__exit__(None, None, None)
    else:
        resource.close()
    closer.join(10)
    assert seen == [1]  # returned after the one release, not during it
    assert resource.closed


def test_close_called_back_from_its_own_release_returns_at_once() -> None:
    def close_again(resource: SlowRelease) -> None:
        resource.closing.set()
        resource.close()  # waiting for the release would wait for itself

    released: list[int] = []

    def block() -> None:
        resource = SlowRelease(close_again)
        with resource:
            pass
        released.append(resource.released)

    assert children.in_another_thread(block, timeout=10) == []
    assert released == [1]


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
