"""pytest plugin: the session setup of a suite that tests resources.

A generated project's ``tests/conftest.py`` registers it beside the leak-check
plugin (``pytest_plugins = [..., "mypackage._runtime.suite"]``), and the
runtime's own suite uses the same pieces.  It

- gives Python's own ``SIGINT`` handler back where a shell started the run as a
  background job (``cmd &``), which ignores SIGINT: the tests that send this
  process a SIGINT, as Ctrl-C would, then get their ``KeyboardInterrupt``;
- lets ``run_with_fd_limit``'s fork server import pytest and the package once;
- puts the tests' files on a tmpfs, where there is one with room;
- freezes what collection made, and collects garbage after every test;
- offers the ``sigint_once_in`` fixture.

Each premise is stated where it is used; the runtime's own suite proves them.
"""

from __future__ import annotations

import gc
import multiprocessing
import os
import shutil
import signal
import tempfile
from typing import TYPE_CHECKING

import pytest

from . import children
from ._resource import _TRACKED

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from types import CodeType

__all__ = [
    "collect_garbage",
    "preload_fork_server",
    "pytest_collection_finish",
    "pytest_configure",
    "pytest_report_header",
    "restore_sigint",
    "sigint_once_in",
    "use_tmpfs",
]

_RUNTIME = __name__.rpartition(".")[0]
_PACKAGE = _RUNTIME.partition("._runtime")[0]
"""The package that carries this runtime (the runtime itself, on its own)."""
_TEMPROOT = "PYTEST_DEBUG_TEMPROOT"
"""pytest's variable for the directory in which ``tmp_path`` makes its directories."""
_TMPFS = "/dev/shm"  # noqa: S108 - pytest makes its own private directory in it
"""A file system in memory on Linux.

The tests check what is written, read, closed and removed, never that it reached
a disk, and every ``fsync`` the code makes still runs: a tmpfs completes it at
once.  On a disk that another process keeps busy, each ``fsync`` waits its turn,
and the scale tests' thousand runs took up to ten times longer.
"""


def pytest_configure(config: pytest.Config) -> None:
    """Python's SIGINT handler, the fork server's preload, and a tmpfs."""
    restore_sigint()
    preload_fork_server()
    use_tmpfs(config)


def restore_sigint() -> None:
    """Give Python's own ``SIGINT`` handler back where SIGINT is ignored."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def preload_fork_server() -> None:
    """Let ``run_with_fd_limit``'s fork server import pytest and the package once.

    Every child is then forked with them imported, instead of importing them
    again (a fifth of a second each).  The premise: importing them only defines
    names (the package's modules are import-pure), so a child forked after the
    server imported them starts as one that imported them itself; the runtime's
    own suite proves that no state passes from the parent or from one child to
    the next.
    """
    multiprocessing.set_forkserver_preload(["pytest", _PACKAGE, f"{_RUNTIME}.testing"])


def use_tmpfs(config: pytest.Config) -> None:
    """Make ``tmp_path`` a folder of ``/dev/shm`` if it is writable with room.

    A ``--basetemp`` or ``PYTEST_DEBUG_TEMPROOT`` given by the user wins.
    """
    chosen = config.option.basetemp is not None or _TEMPROOT in os.environ
    if not chosen and _roomy(_TMPFS):
        os.environ[_TEMPROOT] = _TMPFS


def _roomy(directory: str) -> bool:
    """Whether *directory* is writable with 64 MiB free (a suite uses one)."""
    try:
        free = shutil.disk_usage(directory).free
    except OSError:
        return False
    return os.access(directory, os.W_OK) and free >= 64 << 20


def pytest_report_header() -> str:
    """Say where the tests' files go."""
    return f"tmp_path under: {os.environ.get(_TEMPROOT) or tempfile.gettempdir()}"


def pytest_collection_finish() -> None:
    """Freeze what collection made, so that ``gc.collect()`` stops scanning it.

    The suite collects garbage after every test, and the contract checker after
    every fault it injects: thousands of full collections, which spent most of
    their time walking pytest's own objects, the same ones every time.  The
    premise: what is alive when collection ends (pytest, its plugins, the
    imported modules, the collected tests) holds no resource that a test makes,
    so no test needs the collector to find it.  Freezing leaves every object made
    afterwards, every test's own, to the collector as before (the runtime's suite
    proves it).  No instance of a tracked class may be frozen, whatever its
    state: ``live_resources()``, which ``LeakCheck`` and ``hunt_leaks`` use,
    walks only the objects not frozen.
    """
    gc.collect()
    tracked = tuple(_TRACKED)
    found = [obj for obj in gc.get_objects() if isinstance(obj, tracked)]
    if found:
        msg = f"instances of tracked classes alive after collection: {found!r}"
        raise pytest.UsageError(msg)
    gc.freeze()


@pytest.fixture(autouse=True, name="_collect_garbage")
def collect_garbage() -> Iterator[None]:
    """Collect garbage after each test so that a leak fails the test that made it.

    An object kept alive by a reference cycle is only finalized by the cyclic
    collector; without this fixture its ``ResourceWarning`` would surface in some
    later test, or at the end of the session.
    """
    yield
    gc.collect()


@pytest.fixture(name="sigint_once_in")
def sigint_once_in() -> Iterator[Callable[[CodeType], None]]:
    """Send the main thread one real ``SIGINT`` once it runs a given code object.

    ``sigint_once_in(function.__code__)``: ``children.sigint_once_in``.
    """
    with children.sigint_once_in() as start:
        yield start
