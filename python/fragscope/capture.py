"""Capture without code changes: the hook in every training process a command starts.

`python -m fragscope.run -- CMD` (run.py) sets FRAGSCOPE_CAPTURE=1 and puts a sitecustomize on
PYTHONPATH that calls arm_from_environment() in every Python process. Arming costs nothing until
the program imports torch; then the capture is queued on CUDA's lazy initialisation
(torch.cuda._lazy_call), so only processes that use a GPU (not a launcher, not a data worker)
start it. Started, it turns memory history on with a bounded ring, attaches the OOM observer,
and ends a step after every optimizer step (torch.optim's global step hook); DataLoader batches
give each step's wait and shape. Per rank it writes `<FRAGSCOPE_OUT>/rank<R>/` (steps.jsonl
and, at an OOM, the dump that `fragscope doctor` reads) and publishes the rank file.

Settings (environment, set by run.py from its flags):
  FRAGSCOPE_CAPTURE=1            arm the capture
  FRAGSCOPE_OUT                  folder for rank<R>/ (default ./fragscope-capture)
  FRAGSCOPE_HISTORY_ENTRIES      memory history ring size (default 100000; 0: history off)
  FRAGSCOPE_HISTORY_STACKS       python (default) or all (adds C++ frames; slower)
  FRAGSCOPE_RANK_DIR, FRAGSCOPE_JOB   as for the Monitor
"""

import atexit
import dataclasses
import os
import sys

from . import notices
from .import_hook import when_imported

DEFAULT_OUT = "fragscope-capture"
DEFAULT_HISTORY_ENTRIES = 100_000


@dataclasses.dataclass
class Settings:
    out_dir: str = DEFAULT_OUT
    history_entries: int = DEFAULT_HISTORY_ENTRIES
    stacks: str = "python"
    rank_dir: str = None  # None: $FRAGSCOPE_RANK_DIR or the default
    job: str = None

    @classmethod
    def from_environment(cls, env=os.environ) -> "Settings":
        """Raises ValueError naming the variable that does not parse."""
        settings = cls(out_dir=env.get("FRAGSCOPE_OUT") or DEFAULT_OUT, job=env.get("FRAGSCOPE_JOB"),
                       rank_dir=env.get("FRAGSCOPE_RANK_DIR"), stacks=env.get("FRAGSCOPE_HISTORY_STACKS", "python"))
        entries = env.get("FRAGSCOPE_HISTORY_ENTRIES", "")
        if entries:
            try:
                settings.history_entries = int(entries)
            except ValueError:
                raise ValueError(f"FRAGSCOPE_HISTORY_ENTRIES={entries!r} is not a whole number") from None
        if settings.history_entries < 0:
            raise ValueError(f"FRAGSCOPE_HISTORY_ENTRIES={entries} is negative")
        if settings.stacks not in ("python", "all"):
            raise ValueError(f"FRAGSCOPE_HISTORY_STACKS={settings.stacks!r} is not python or all")
        return settings


def arm_from_environment(env=os.environ) -> bool:
    """Arms the capture when FRAGSCOPE_CAPTURE=1; True when armed. Torch-free and never raises."""
    if env.get("FRAGSCOPE_CAPTURE") != "1":
        return False
    try:
        settings = Settings.from_environment(env)
    except ValueError as error:
        print(f"fragscope: capture off: {error}", file=sys.stderr)
        return False
    when_imported("torch", lambda torch: torch.cuda._lazy_call(lambda: _start_quietly(settings)))
    return True


class Capture:
    """One process's capture: a StepWatch driven by optimizer steps. start()/stop() may also be
    called directly (the H200 check measures the overhead by turning it on and off)."""

    def __init__(self, settings: Settings):
        from torch.optim.optimizer import register_optimizer_step_post_hook  # not an attribute of torch.optim
        from .watch import StepWatch

        self.pid = os.getpid()
        self.watch = StepWatch(settings.out_dir, job=settings.job, rank_dir=settings.rank_dir,
                               history_max_entries=settings.history_entries or None, stacks=settings.stacks)
        self._hook = register_optimizer_step_post_hook(self._after_optimizer_step)

    def _after_optimizer_step(self, optimizer, args, kwargs):
        self.watch.step_end()

    def stop(self) -> None:
        """Undoes every part, whichever fails; never raises."""
        from . import cuda

        self._hook.remove()
        try:
            if self.watch.history:  # what the watch turned on, not what the settings asked for
                cuda.disable_history()
        except Exception as error:
            notices.warn("history-off", f"memory history not turned off: {type(error).__name__}: {error}")
        self.watch.close()


_active = None


def start(settings: Settings) -> Capture:
    """Starts the capture in this process (once); later calls return the running one."""
    global _active
    if _active is None:
        _active = Capture(settings)
        atexit.register(_stop_at_exit)
    return _active


def stop() -> None:
    global _active
    if _active is not None:
        capture, _active = _active, None
        capture.stop()


def _stop_at_exit():
    """A child made by os.fork() inherits this exit handler and the capture object, not the capture:
    only the process that started it stops it."""
    if _active is not None and _active.pid == os.getpid():
        stop()


def _start_quietly(settings):
    try:
        start(settings)
    except Exception as error:  # runs inside CUDA's lazy initialisation: must not fail it
        notices.warn("capture", f"capture off: {type(error).__name__}: {error}")
