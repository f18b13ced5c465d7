"""The stress toolkit's own promises, where a broken one would blame a class."""

from __future__ import annotations

import signal
import time

import pytest

from .toolkit import STORMS, _Interrupter

pytestmark = pytest.mark.stress


def test_a_storm_ended_by_another_exception_sends_no_signal_after_it() -> None:
    # A test's timeout ends a storm wherever it is, perhaps with a signal armed:
    # landing later, that signal would fail whatever runs next.
    storm = STORMS["SIGALRM"]
    handler = signal.getsignal(storm.signum)
    with pytest.raises(TimeoutError), _Interrupter(storm) as interrupter:
        interrupter.arm(0.05)
        raise TimeoutError
    time.sleep(0.1)
    assert signal.getsignal(storm.signum) is handler
    assert (interrupter.sent, interrupter.delivered) == (1, 0)
