"""Exceptions raised by every context manager of the package.

They are defined in the template's runtime (``_runtime/errors.py``).
"""

from __future__ import annotations

from ._runtime.errors import ClosedResourceError, ReentryError

__all__ = ["ClosedResourceError", "ReentryError"]
