"""Put on PYTHONPATH by `python -m fragscope.run`: arms fragscope's capture in every Python process
the command starts (fragscope/capture.py), then runs the sitecustomize this file shadows.
Never raises: a process must start whatever happens here."""


def _arm():
    import os
    import sys

    try:
        from fragscope import capture
    except ImportError:  # an interpreter without fragscope installed: use the one that ran fragscope.run
        sys.path.append(os.environ.get("FRAGSCOPE_HOOK_PATH", ""))
        from fragscope import capture
    capture.arm_from_environment()


def _run_shadowed_sitecustomize():
    import importlib.machinery
    import importlib.util
    import os
    import sys

    here = os.path.dirname(os.path.abspath(__file__))
    rest = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is not None and spec.loader is not None:
        spec.loader.exec_module(importlib.util.module_from_spec(spec))


for _step in (_arm, _run_shadowed_sitecustomize):
    try:
        _step()
    except Exception as _error:
        import sys

        print(f"fragscope: sitecustomize: {type(_error).__name__}: {_error}", file=sys.stderr)
