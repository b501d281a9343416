"""Warnings from the hook: logged on the `fragscope` logger, each kind at most once per interval.

The hook runs inside someone's training job: it reports what it had to give up on (a rank
folder it cannot use, a flag file it will not read) without raising and without flooding the
job's log with one line per step.
"""

import functools
import logging
import os
import threading
import time

LOGGER = logging.getLogger("fragscope")
REPEAT_AFTER_S = 600.0

_last_logged = {}
_lock = threading.Lock()


def describe(error: Exception) -> str:
    """One line: the path and the reason, as `fragscope` prints its own errors."""
    if isinstance(error, OSError) and error.filename:
        return f"{error.filename}: {error.strerror or error}"
    return str(error) or type(error).__name__


def warn(kind: str, message: str) -> None:
    """Logs `message` unless a warning of the same kind was logged in the last REPEAT_AFTER_S."""
    now = time.monotonic()
    with _lock:
        last = _last_logged.get(kind)
        if last is not None and now - last < REPEAT_AFTER_S:
            return
        _last_logged[kind] = now
    LOGGER.warning("fragscope: %s", message)


def never_raises(kind: str):
    """Decorates a callback a framework calls from its training loop: an exception inside it is
    logged (rate-limited) and the callback returns None instead of failing the job. Not for code
    that holds a collective (an all_reduce, a save with a barrier): swallowed on one rank only, its
    failure leaves the other ranks blocked in it."""
    def decorate(function):
        @functools.wraps(function)
        def guarded(*args, **kwargs):
            try:
                return function(*args, **kwargs)
            except Exception as error:
                warn(kind + ":" + function.__name__, f"{function.__qualname__} failed: "
                                                     f"{type(error).__name__}: {error}")
                return None
        return guarded
    return decorate


def _forget_lock_in_child():
    """The writer thread warns too: a fork while it held the lock would leave the child's copy locked forever."""
    global _lock
    _lock = threading.Lock()


os.register_at_fork(after_in_child=_forget_lock_in_child)
