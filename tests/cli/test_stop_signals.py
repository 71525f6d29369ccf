"""``StopSignals``: a signal ends a command's wait loop, whenever it comes, and raises nothing."""

from __future__ import annotations

import os
import random
import signal
import threading
import time

import pytest

from pysparklog.cli._common import StopSignals


def send_later(delay_s: float, sig: signal.Signals = signal.SIGINT) -> threading.Timer:
    """Send ``sig`` to this process from another thread after ``delay_s``, as a shell's Ctrl-C would."""
    timer = threading.Timer(delay_s, os.kill, (os.getpid(), sig))
    timer.start()
    return timer


def test_a_wait_without_a_signal_runs_out_and_reports_no_stop() -> None:
    with StopSignals(signal.SIGINT) as stop:
        assert stop.wait(0.01) is False
    assert stop.requested is False


def test_a_signal_ends_the_wait_and_is_not_raised() -> None:
    with StopSignals(signal.SIGINT, signal.SIGTERM) as stop:
        send_later(0.05, signal.SIGTERM).join()
        assert stop.wait(60) is True  # returns at once: the request came before the wait
    assert stop.requested is True


def test_the_previous_handlers_are_back_afterwards() -> None:
    # Python's own Ctrl-C handler before, whatever the suite started with: a shell without job control starts its
    # background commands with SIGINT ignored, and Python then installs no handler of its own.
    started_with = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        before = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
        with StopSignals(signal.SIGINT, signal.SIGTERM):
            assert signal.getsignal(signal.SIGINT) != before[0]
        assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == before
        with pytest.raises(KeyboardInterrupt):  # Python's own Ctrl-C again
            send_later(0).join()
            time.sleep(5)  # not reached: the handler runs as soon as the main thread is back in Python code
    finally:
        signal.signal(signal.SIGINT, started_with)


@pytest.mark.timeout(60)
def test_signals_at_any_moment_of_a_polling_loop_end_it() -> None:
    """A consumer's loop: short waits, back to back. A handler that took a lock (``threading.Event.set``) could
    wait forever for the lock its own thread holds inside ``Event.wait``; here every loop ends."""
    rng = random.Random(7)
    for _ in range(300):
        with StopSignals(signal.SIGINT) as stop:
            timer = send_later(rng.uniform(0, 0.002))
            while not stop.wait(0.0005):
                pass
            timer.join()
        assert stop.requested
