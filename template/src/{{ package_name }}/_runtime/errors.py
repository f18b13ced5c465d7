"""Exceptions raised by every context manager of the package."""

from __future__ import annotations

__all__ = ["ClosedResourceError", "ReentryError"]


class ClosedResourceError(RuntimeError):
    """Raised when a resource is used after it was released.

    The message names the object, so a traceback tells which resource was closed.
    """


class ReentryError(RuntimeError):
    """Raised when a single-use context manager is entered a second time.

    Each object manages one acquisition: create a new object for each ``with`` block.
    """

    def __init__(self, resource: object) -> None:
        """Build the message from the resource's ``repr``."""
        super().__init__(
            f"{resource!r} was already entered; {type(resource).__name__} objects are "
            "single-use: create a new one for each 'with' block"
        )
