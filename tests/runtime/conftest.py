"""Make the runtime importable as ``_runtime``, and set up the suite as a project's.

The runtime's modules import each other relatively, so the folder is imported as
a package: a private folder on ``sys.path`` holds a link named ``_runtime`` to it.
Children (the fork server of ``run_with_fd_limit``, an inner pytest session) get
that folder from ``sys.path`` too.  The rest is what a generated project's
``tests/conftest.py`` registers: the leak-check plugin and ``_runtime.suite``
(garbage collected after each test, the fork server preloaded, collection's
objects frozen).
"""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
from pathlib import Path

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

from _runtime import pytest_plugin, suite  # noqa: E402 - importable only now
from _runtime.pytest_plugin import leak_check  # noqa: E402
from _runtime.suite import (  # noqa: E402
    collect_garbage,
    pytest_collection_finish,
    pytest_report_header,
    sigint_once_in,
)

__all__ = [
    "collect_garbage",
    "leak_check",
    "pytest_collection_finish",
    "pytest_report_header",
    "sigint_once_in",
]


def pytest_addoption(parser: pytest.Parser) -> None:
    """The plugin's options: registered here, as a project's conftest registers it."""
    pytest_plugin.pytest_addoption(parser)


def pytest_configure(config: pytest.Config) -> None:
    """The two plugins, as a project's ``conftest.py`` registers them.

    The tmpfs only when the suite runs on its own: the template's session keeps
    its renders and environments where it chose, not in memory.
    """
    pytest_plugin.pytest_configure(config)
    # The plugin's own test runs a pytest session (pytester's) of its own.
    config.pluginmanager.import_plugin("pytester")
    suite.restore_sigint()
    suite.preload_fork_server()
    if config.rootpath == Path(__file__).parent:
        suite.use_tmpfs(config)
