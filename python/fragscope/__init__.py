"""fragscope's PyTorch side: step telemetry, the rank file the node agent reads, OOM dumps.

`fragscope.torch.Monitor` wraps a training loop (it imports torch); the other modules use the
standard library only, so the node agent's tests can run the real writer without torch.
"""

__version__ = "0.1.0"
