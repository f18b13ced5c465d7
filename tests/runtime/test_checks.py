"""The shared argument checks: what they take, and the errors that name the argument."""

from __future__ import annotations

import json
import math
import os
import pathlib
import re
import threading

import pytest
from _runtime._checks import (
    C_INT_MS_MAX,
    FROM_0_TO_C_INT_MS,
    FROM_0_TO_TIMEOUT_MAX,
    checked_choice,
    checked_instance,
    checked_path,
    checked_seconds,
    checked_timeout,
    wrong_type,
)


class _PathLike(os.PathLike[str]):
    def __fspath__(self) -> str:
        return "a.txt"


@pytest.mark.parametrize(
    "path", ["a.txt", pathlib.Path("a.txt"), pathlib.PurePath("a"), _PathLike()]
)
def test_checked_path_returns_a_path_as_given(path: object) -> None:
    assert checked_path(path) is path


@pytest.mark.parametrize(
    ("path", "kind"), [(3, "int"), (True, "bool"), (b"a", "bytes"), (None, "NoneType")]
)
def test_checked_path_refuses_anything_else_naming_the_argument(
    path: object, kind: str
) -> None:
    message = f"database must be a str or an os.PathLike, not {kind}$"
    with pytest.raises(TypeError, match=message):
        checked_path(path, "database")
    with pytest.raises(TypeError, match=r"^path must be"):
        checked_path(path)


def test_checked_instance_names_the_class_by_its_package() -> None:
    given = pathlib.PurePosixPath("a")
    assert checked_instance(given, pathlib.PurePath, "path") is given
    message = "^connection must be a pathlib.PurePath, not str$"
    with pytest.raises(TypeError, match=message):
        checked_instance("a", pathlib.PurePath, "connection")
    # Defined in json.decoder, exported as json.JSONDecoder (as psycopg.Connection).
    assert json.JSONDecoder.__module__ == "json.decoder"
    message = r"^decoder must be a json\.JSONDecoder, not int$"
    with pytest.raises(TypeError, match=message):
        checked_instance(3, json.JSONDecoder, "decoder")


@pytest.mark.parametrize("value", ["w", "wb"])
def test_checked_choice_takes_a_choice(value: str) -> None:
    assert checked_choice(value, ("w", "wb"), "mode") is value


def test_checked_choice_names_every_choice_otherwise() -> None:
    with pytest.raises(ValueError, match=r"^mode must be one of 'w', 'wb', not 'a'$"):
        checked_choice("a", ("w", "wb"), "mode")


def test_checked_choice_refuses_an_unhashable_value_as_any_other() -> None:
    with pytest.raises(ValueError, match=r"not \['w'\]$"):
        checked_choice(["w"], ("w", "wb"), "mode")


def test_wrong_type_names_the_argument_and_the_given_type() -> None:
    error = wrong_type("encoding", "a str or None", 3)
    assert isinstance(error, TypeError)
    assert str(error) == "encoding must be a str or None, not int"


@pytest.mark.parametrize("seconds", [0, 0.0, 1, 2.5, C_INT_MS_MAX])
def test_checked_seconds_takes_the_range_bounds_included(seconds: float) -> None:
    assert (
        checked_seconds(seconds, C_INT_MS_MAX, FROM_0_TO_C_INT_MS, "grace") is seconds
    )


@pytest.mark.parametrize(
    "seconds", [-0.001, C_INT_MS_MAX + 1, math.nan, math.inf, -math.inf]
)
def test_checked_seconds_refuses_out_of_range_with_the_range_named(
    seconds: float,
) -> None:
    message = (
        f"grace must be a number of seconds from 0 to 2147483 \\(24.8 days\\), "
        f"not {re.escape(repr(seconds))}$"
    )
    with pytest.raises(ValueError, match=message):
        checked_seconds(seconds, C_INT_MS_MAX, FROM_0_TO_C_INT_MS, "grace")


@pytest.mark.parametrize("seconds", [None, True, "1", [1]])
def test_checked_seconds_refuses_what_is_no_number(seconds: object) -> None:
    message = f"^grace must be an int or a float, not {re.escape(repr(seconds))}$"
    with pytest.raises(TypeError, match=message):
        checked_seconds(seconds, C_INT_MS_MAX, FROM_0_TO_C_INT_MS, "grace")


def test_checked_seconds_above_zero_refuses_zero_and_takes_the_maximum() -> None:
    expected = "a positive number of seconds"
    assert checked_seconds(C_INT_MS_MAX, C_INT_MS_MAX, expected, "t", above_zero=True)
    assert checked_seconds(1e-9, C_INT_MS_MAX, expected, "t", above_zero=True) == 1e-9
    for seconds in (0, -1, math.nan):
        with pytest.raises(
            ValueError,
            match=f"^t must be a positive number of seconds, not {seconds!r}$",
        ):
            checked_seconds(seconds, C_INT_MS_MAX, expected, "t", above_zero=True)


def test_checked_timeout_takes_none_and_names_it_in_both_errors() -> None:
    assert checked_timeout(None, threading.TIMEOUT_MAX, FROM_0_TO_TIMEOUT_MAX) is None
    assert checked_timeout(0, threading.TIMEOUT_MAX, FROM_0_TO_TIMEOUT_MAX) == 0
    maximum = threading.TIMEOUT_MAX
    assert checked_timeout(maximum, maximum, FROM_0_TO_TIMEOUT_MAX) == maximum
    with pytest.raises(
        TypeError, match=r"^timeout must be an int, a float or None, not True$"
    ):
        checked_timeout(True, maximum, FROM_0_TO_TIMEOUT_MAX)
    message = (
        r"^timeout must be None or a number of seconds from 0 to "
        r"threading\.TIMEOUT_MAX "
        rf"\({maximum:.0f}\), not -1$"
    )
    with pytest.raises(ValueError, match=message):
        checked_timeout(-1, maximum, FROM_0_TO_TIMEOUT_MAX)
    with pytest.raises(ValueError, match=r"^wait must be None or"):
        checked_timeout(math.nan, maximum, FROM_0_TO_TIMEOUT_MAX, "wait")
