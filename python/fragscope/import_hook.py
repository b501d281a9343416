"""Runs a function right after a module is first imported, without importing it (torch-free).

The no-code capture must not import torch into every Python process a command starts (a
launcher, a data worker): it waits until the program imports torch itself.
"""

import importlib.abc
import importlib.machinery
import sys
import threading


class _AfterImport(importlib.abc.MetaPathFinder):
    """A one-shot finder: when `name` is imported, lets the other finders find it and wraps the
    found loader's exec_module so `callback(module)` runs after the module's own code."""

    def __init__(self, name, callback):
        self.name = name
        self.callback = callback

    def find_spec(self, fullname, path, target=None):
        if fullname != self.name:
            return None
        with _lock:
            if self not in sys.meta_path:
                return None
            sys.meta_path.remove(self)
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        original = spec.loader.exec_module
        callback = self.callback

        def exec_module(module):
            original(module)
            try:
                callback(module)
            except Exception as error:  # the program's import must not fail because of the hook
                print(f"fragscope: after importing {fullname}: {type(error).__name__}: {error}", file=sys.stderr)

        spec.loader.exec_module = exec_module
        return spec


_lock = threading.Lock()


def when_imported(name: str, callback) -> None:
    """Calls callback(module) after the top-level module `name` is imported: at once if it
    already is, else once, right after its first import finishes executing."""
    module = sys.modules.get(name)
    if module is not None:
        callback(module)
        return
    with _lock:
        sys.meta_path.insert(0, _AfterImport(name, callback))


def waiting_for() -> list:
    """Names of the modules whose import is still awaited (for tests and `fragscope.run --check`)."""
    return [finder.name for finder in sys.meta_path if isinstance(finder, _AfterImport)]
