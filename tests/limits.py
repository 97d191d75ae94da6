"""A wall-clock limit for fuzz examples: a hang becomes a test failure, not a stuck run."""

import contextlib
import signal


class Hang(Exception):
    """An example ran past its time limit."""


@contextlib.contextmanager
def time_limit(seconds: int):
    def alarm(signum, frame):
        signal.alarm(1)         # again, should this one land where Python ignores it (a gc callback)
        raise Hang(f"ran past {seconds} s")

    previous = signal.signal(signal.SIGALRM, alarm)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
