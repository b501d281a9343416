"""Splits wall time into steps, and each step into the wait for its data and the rest, from events.

Used where the hook does not own the loop (a Trainer, a Lightning module, a script run under
`fragscope.run`): a step ends at the framework's step-end event (or after an optimizer step);
the wait is what the DataLoader reported for the step's batches, else the time from the previous
step's end to the framework's step-begin event. Torch-free; monotonic clock.
"""

import time


class StepClock:
    """Not thread-safe: the training thread reports batches and steps."""

    def __init__(self, now=time.perf_counter):
        self._now = now
        self._last_end = None  # end of the previous step, or of a pause
        self._begin = None
        self._waits = None  # seconds the DataLoader reported since the last step, None: none reported

    def add_wait(self, seconds: float) -> None:
        """The loader spent `seconds` handing out a batch for the coming step."""
        self._waits = (self._waits or 0.0) + seconds

    def begin(self) -> None:
        """The step's work starts now (what came before it since the last step was waiting)."""
        if self._begin is None:
            self._begin = self._now()

    def end(self):
        """Ends the step; returns (wait seconds, step seconds). The first step counts from its
        begin (or its first reported wait) only."""
        now = self._now()
        if self._waits is not None:
            wait = self._waits
        elif self._begin is not None and self._last_end is not None:
            wait = self._begin - self._last_end
        else:
            wait = 0.0
        if self._last_end is not None:
            step = now - self._last_end
        else:
            step = now - self._begin + wait if self._begin is not None else wait
        self._last_end, self._begin, self._waits = now, None, None
        return wait, max(step, wait)

    def restart(self) -> None:
        """Time until now (an evaluation, a checkpoint save) belongs to no step; waits reported
        in it are dropped."""
        if self._last_end is not None:
            self._last_end = self._now()
        self._begin, self._waits = None, None
