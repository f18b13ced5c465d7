"""pytest plugin: leak-check a test in one line.

Register it in ``tests/conftest.py`` (``pytest_plugins = ["<package>.pytest_plugin"]``);
then the ``leak_check`` marker, the ``leak_check`` fixture and ``pytest --leak-check``
run a test's body inside ``testing.LeakCheck``.  The plugin is the template's
runtime (``_runtime/pytest_plugin.py``); this module is its name in the package.

Needs ``psutil`` (the ``testing`` extra).
"""

from __future__ import annotations

from ._runtime.pytest_plugin import leak_check, pytest_addoption, pytest_configure

__all__ = ["leak_check", "pytest_addoption", "pytest_configure"]
