"""fragscope's PyTorch side: step telemetry, the rank file the node agent reads, OOM dumps.

Three ways in (docs/hook.md): `fragscope.Monitor` around a loop you own (`fragscope.torch`);
a callback for a framework's loop (`fragscope.integrations.hf`, `fragscope.integrations.lightning`);
no code at all, `python -m fragscope.run -- COMMAND` (`fragscope.capture`). Importing
`fragscope` imports neither torch nor a framework; the writer modules (shm, recorder, telemetry,
checkpoint, rank_folder) use the standard library only, so the node agent's tests run them
without torch.
"""

__version__ = "0.1.0"


def __getattr__(name):
    if name == "Monitor":  # imports torch only when asked for
        from .torch import Monitor
        return Monitor
    raise AttributeError(f"module 'fragscope' has no attribute {name!r}")
