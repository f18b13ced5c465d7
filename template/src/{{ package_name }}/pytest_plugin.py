"""pytest plugin: leak-check a test in one line (the runtime's ``pytest_plugin``).

Registered in ``tests/conftest.py``: the ``leak_check`` marker, the ``leak_check``
fixture and ``pytest --leak-check`` run a test's body inside ``testing.LeakCheck``.
Needs ``psutil`` (the ``testing`` extra).
"""

from __future__ import annotations

from ._runtime.pytest_plugin import leak_check, pytest_addoption, pytest_configure

__all__ = ["leak_check", "pytest_addoption", "pytest_configure"]
