"""Make the runtime importable as ``_runtime``, and set up the suite as a project's.

The runtime's modules import each other relatively, so the folder is imported as
a package: a private folder on ``sys.path`` holds a link named ``_runtime`` to it.
Children (the fork server of ``run_with_fd_limit``, an inner pytest session) get
that folder from ``sys.path`` too.  The rest is what a generated project's
``tests/conftest.py`` does: the leak-check plugin, garbage collected after each
test, the fork server preloaded, collection's objects frozen.
"""

from __future__ import annotations

import atexit
import gc
import multiprocessing
import os
import shutil
import signal
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

TEMPLATE = Path(__file__).resolve().parents[2] / "template"
SHIPPED = TEMPLATE / "src" / "{{ package_name }}" / "_runtime"
RUNTIME = Path(os.environ.get("RUNTIME_UNDER_TEST") or SHIPPED)
"""The runtime's folder in the template, which every render copies byte for byte,
or a copy named by ``RUNTIME_UNDER_TEST`` (``tests/mutation_check.py`` mutates one)."""


def _link_runtime() -> None:
    folder = Path(tempfile.mkdtemp(prefix="runtime-import-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    (folder / "_runtime").symlink_to(RUNTIME, target_is_directory=True)
    sys.path.insert(0, str(folder))


if "_runtime" not in sys.modules:
    _link_runtime()

from _runtime import children, pytest_plugin  # noqa: E402 - importable only now
from _runtime._resource import _TRACKED  # noqa: E402
from _runtime.pytest_plugin import leak_check  # noqa: E402

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from types import CodeType

__all__ = ["leak_check"]

_TEMPROOT = "PYTEST_DEBUG_TEMPROOT"
_TMPFS = "/dev/shm"  # noqa: S108 - pytest makes its own private directory in it


def pytest_addoption(parser: pytest.Parser) -> None:
    """The plugin's options: registered here, as a project's conftest registers it."""
    pytest_plugin.pytest_addoption(parser)


def pytest_configure(config: pytest.Config) -> None:
    """The plugin; Python's SIGINT handler; the fork server's preload; a tmpfs.

    A shell starts a background job with SIGINT ignored: the tests that send this
    process a SIGINT get Python's own handler back first.  A ``--basetemp`` or
    ``PYTEST_DEBUG_TEMPROOT`` given by the user wins over the tmpfs.
    """
    pytest_plugin.pytest_configure(config)
    # The plugin's own test runs a pytest session (pytester's) of its own.
    config.pluginmanager.import_plugin("pytester")
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    multiprocessing.set_forkserver_preload(["pytest", "_runtime", "_runtime.testing"])
    # Only when the suite runs on its own: the template's session keeps its renders
    # and environments where it chose, not in memory.
    alone = config.rootpath == Path(__file__).parent
    chosen = config.option.basetemp is not None or _TEMPROOT in os.environ
    if alone and not chosen and _roomy(_TMPFS):
        os.environ[_TEMPROOT] = _TMPFS


def _roomy(directory: str) -> bool:
    """Whether *directory* is writable with 64 MiB free (the suite uses one)."""
    try:
        free = shutil.disk_usage(directory).free
    except OSError:
        return False
    return os.access(directory, os.W_OK) and free >= 64 << 20


def pytest_collection_finish() -> None:
    """Freeze what collection made, so that ``gc.collect()`` stops scanning it.

    The premise (a generated ``conftest.py`` says more): what is alive when
    collection ends holds no resource that a test makes;
    ``test_the_garbage_of_a_test_is_still_collected`` proves the rest is still
    collected.  No instance of a tracked class may be frozen.
    """
    gc.collect()
    tracked = tuple(_TRACKED)
    found = [obj for obj in gc.get_objects() if isinstance(obj, tracked)]
    if found:
        msg = f"instances of tracked classes alive after collection: {found!r}"
        raise pytest.UsageError(msg)
    gc.freeze()


@pytest.fixture(autouse=True)
def _collect_garbage() -> Iterator[None]:
    """Collect garbage after each test so that a leak fails the test that made it."""
    yield
    gc.collect()


@pytest.fixture
def sigint_once_in() -> Iterator[Callable[[CodeType], None]]:
    """``children.sigint_once_in``: one real ``SIGINT`` once a code object runs."""
    with children.sigint_once_in() as start:
        yield start
