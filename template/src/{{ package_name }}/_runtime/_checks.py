"""Argument checks that several resource classes share.

Each raises where the object is made, before anything is open, with a message
that names the argument and what it must be.
"""

from __future__ import annotations

import os
import threading
from pathlib import PurePath
from typing import TypeVar

__all__ = [
    "C_INT_MS_MAX",
    "FROM_0_TO_C_INT_MS",
    "FROM_0_TO_TIMEOUT_MAX",
    "PATH_TYPES",
    "StrPath",
    "checked_choice",
    "checked_instance",
    "checked_path",
    "checked_seconds",
    "checked_timeout",
    "wrong_type",
]

T = TypeVar("T")
StrPath = str | os.PathLike[str]
PATH_TYPES = (PurePath, str, os.PathLike)
"""What a path may be, in the order that checks a ``Path`` fastest: the
``os.PathLike`` ABC, four times as slow as a class, last."""

C_INT_MS_MAX = 2_147_483.0
"""The longest wait, in seconds, of an API that takes milliseconds as a C ``int``
(``2**31 - 1`` ms, 24.8 days).  Past it the wait overflows: SQLite's busy timeout
then does not wait at all, ``poll()`` under a socket's timeout wraps around
(before CPython's gh-126876 fix), and libpq's ``connect_timeout`` is out of range."""
FROM_0_TO_C_INT_MS = "a number of seconds from 0 to 2147483 (24.8 days)"
FROM_0_TO_TIMEOUT_MAX = (
    f"a number of seconds from 0 to threading.TIMEOUT_MAX ({threading.TIMEOUT_MAX:.0f})"
)
"""What the two usual ranges are called in a ``ValueError``."""


def wrong_type(name: str, expected: str, value: object) -> TypeError:
    """The error for argument *name*, which must be *expected*, given *value*."""
    return TypeError(f"{name} must be {expected}, not {type(value).__name__}")


def checked_instance(value: object, kind: type[T], name: str) -> T:
    """*value*, an instance of *kind*; else ``TypeError``.

    The error names *kind* by its top-level package, as ``sqlite3`` and
    ``psycopg`` export their connections: ``psycopg.Connection``.
    """
    if isinstance(value, kind):
        return value
    package = kind.__module__.partition(".")[0]
    raise wrong_type(name, f"a {package}.{kind.__qualname__}", value)


def checked_choice(value: T, choices: tuple[T, ...], name: str) -> T:
    """*value*, one of *choices* (compared with ``==``); else ``ValueError``."""
    if value in choices:
        return value
    msg = f"{name} must be one of {', '.join(map(repr, choices))}, not {value!r}"
    raise ValueError(msg)


def checked_path(value: object, name: str = "path") -> StrPath:
    """*value*, a ``str`` or an ``os.PathLike``; else ``TypeError``.

    An ``int`` is refused: ``open()`` and its kin would take it for a descriptor.
    """
    if isinstance(value, PATH_TYPES):
        return value
    raise wrong_type(name, "a str or an os.PathLike", value)


def checked_seconds(
    value: object,
    most: float,
    expected: str,
    name: str = "timeout",
    *,
    above_zero: bool = False,
) -> float:
    """*value*, a number of seconds from 0 (above 0 if *above_zero*) to *most*.

    ``TypeError`` for anything but an ``int`` or a ``float`` (``True`` is no
    number of seconds, and ``None`` no number either), ``ValueError`` for one out
    of range, NaN and infinity included; *expected* names the range in it.
    """
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        msg = f"{name} must be an int or a float, not {value!r}"
        raise TypeError(msg)
    in_range = value > 0 if above_zero else value >= 0  # NaN is neither
    if not (in_range and value <= most):
        msg = f"{name} must be {expected}, not {value!r}"
        raise ValueError(msg)
    return value


def checked_timeout(
    value: object, most: float, expected: str, name: str = "timeout"
) -> float | None:
    """*value*, ``None`` (no limit) or seconds from 0 to *most*: checked.

    As ``checked_seconds``, with ``None`` taken and named in both errors.
    """
    if value is None:
        return None
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        msg = f"{name} must be an int, a float or None, not {value!r}"
        raise TypeError(msg)
    return checked_seconds(value, most, f"None or {expected}", name)
