"""pytest plugin: leak-check a test in one line.

Register it in ``tests/conftest.py`` by the package's ``pytest_plugin`` module,
which re-exports this one (``pytest_plugins = ["mypackage.pytest_plugin"]``).

Then any of these runs the test's body inside ``testing.LeakCheck``
and fails the test, naming what leaked, if the body leaves a file descriptor,
thread, child process, inet connection, tracked resource or asyncio task open,
or lets the garbage collector close an object (a ``ResourceWarning``).

Example:
    ```python
    @pytest.mark.leak_check
    def test_report_is_closed() -> None: ...

    @pytest.mark.leak_check(settle=0.1)  # wait at most 0.1 s for threads to end
    def test_worker_stops() -> None: ...

    @pytest.mark.leak_check(ignore=["thread"], warmup=start_logging)
    def test_with_a_log() -> None: ...

    def test_client(leak_check: LeakCheck) -> None: ...  # the fixture
    ```

``pytest --leak-check`` checks every test; ``--leak-check-settle=SECONDS`` sets
how long a check waits for threads and child processes to end (one second unless
the marker says otherwise).

The marker's keyword arguments are ``LeakCheck``'s (``settle``, ``ignore``,
``warmup``).  The snapshot is taken when the test function starts, after its
fixtures are set up (and after other plugins started capturing its output), and
compared when it returns, before they are torn down: what fixtures hold is not
counted, but for a fixture the test asks for itself with
``request.getfixturevalue()``, which is set up inside the check.  A test that
fails on its own is reported with its own error, unchecked.

Needs ``psutil`` (the ``testing`` extra).
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

import pytest

from .leak_check import LeakCheck

if TYPE_CHECKING:
    from collections.abc import Iterator

__all__ = [
    "leak_check",
    "pytest_addoption",
    "pytest_configure",
]

_MARKER = (
    "leak_check(settle=1.0, ignore=(), warmup=None): fail the test if its body "
    "leaves file descriptors, threads, child processes, inet connections, tracked "
    "resources or asyncio tasks open (testing.LeakCheck)"
)
_HOOKS = f"{__name__}-leak-check"


def pytest_addoption(parser: pytest.Parser) -> None:
    """Add ``--leak-check`` and ``--leak-check-settle``."""
    group = parser.getgroup("leak-check")
    group.addoption(
        "--leak-check",
        action="store_true",
        default=False,
        help="leak-check every test, as if each had the leak_check marker",
    )
    group.addoption(
        "--leak-check-settle",
        type=float,
        default=1.0,
        metavar="SECONDS",
        help="how long a leak check waits for threads and children to end "
        "when its marker does not say (default: 1.0)",
    )


def pytest_configure(config: pytest.Config) -> None:
    """Declare the marker and register the hook that runs the checks."""
    config.addinivalue_line("markers", _MARKER)
    if not config.pluginmanager.has_plugin(_HOOKS):
        config.pluginmanager.register(_hooks(), _HOOKS)


@pytest.fixture
def leak_check(request: pytest.FixtureRequest) -> LeakCheck:
    """Leak-check the test that requests it; the check is returned, not yet entered.

    The test's body runs inside it: ``leak_check.leaks()`` lists what the body
    holds so far.  The ``leak_check`` marker's arguments apply if present.
    """
    item = request.node
    if not isinstance(item, pytest.Item):
        msg = f"the leak_check fixture serves tests, not {item!r}"
        raise TypeError(msg)
    check = item.stash.get(_check_key(), None)
    return check if check is not None else _new_check(item)


def _check_for(item: pytest.Item) -> LeakCheck | None:
    """Return the check to run around *item*'s body, or None if it has none."""
    check = item.stash.get(_check_key(), None)
    if check is not None:
        return check
    if item.get_closest_marker("leak_check") or item.config.getoption("leak_check"):
        return _new_check(item)
    return None


def _new_check(item: pytest.Item) -> LeakCheck:
    settle = float(item.config.getoption("leak_check_settle"))
    marker = item.get_closest_marker("leak_check")
    arguments = dict(marker.kwargs) if marker is not None else {}
    arguments["settle"] = float(arguments.get("settle", settle))
    check = item.stash[_check_key()] = LeakCheck(**arguments)
    return check


@functools.cache
def _check_key() -> pytest.StashKey[LeakCheck]:
    """The key of a test's check in its stash (made on first use, not on import)."""
    return pytest.StashKey[LeakCheck]()


def _hooks() -> object:
    """Build the plugin object that wraps each test's call in its check.

    The hook marker is applied when pytest configures the plugin, not when the
    module is imported, so that importing any module of the package only
    defines names.
    """

    class LeakCheckHooks:
        # The innermost wrapper: the other plugins' (output capture's) dup2
        # their descriptors in place before the snapshot, and back after.
        @pytest.hookimpl(wrapper=True, trylast=True)
        def pytest_runtest_call(self, item: pytest.Item) -> Iterator[None]:
            check = _check_for(item)
            if check is None:
                yield
                return
            with check:
                yield

    return LeakCheckHooks()
