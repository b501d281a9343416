"""fragscope for Lightning (`lightning.pytorch`, or the older `pytorch_lightning`): one callback.

    from fragscope.integrations.lightning import FragscopeCallback
    trainer = L.Trainer(callbacks=[FragscopeCallback(job="sft")])

Each rank writes `<out_dir>/rank<R>/steps.jsonl` (default out_dir: `<default_root_dir>/fragscope`),
publishes its rank file for the node agent and, at an OOM, leaves the dump `fragscope doctor`
reads in the same folder (watch.py); Lightning's on_exception gives the OOM message. A step is
a training batch (on_train_batch_start to on_train_batch_end; `optimizer_step` is false on the
accumulating ones); its wait is the time the DataLoader took. Validation is phase "eval" and
left out of the step times. When the agent asks for a checkpoint (all ranks agree, every
`request_poll_every` optimizer steps), the callback saves `fragscope-request-step<N>.ckpt`
beside the ModelCheckpoint's files and acknowledges.
"""

import contextlib
import os

try:
    import lightning.pytorch as pl
except ImportError:
    try:
        import pytorch_lightning as pl
    except ImportError as missing:
        raise ImportError("fragscope.integrations.lightning needs Lightning (pip install lightning)") from missing

from ..capture import DEFAULT_HISTORY_ENTRIES
from ..notices import never_raises
from ..watch import StepWatch, any_rank


class FragscopeCallback(pl.Callback):
    """history_max_entries: memory history ring (0 or None: off). save_on_request: let the node
    agent's checkpoint requests trigger a save. Other arguments as for StepWatch."""

    def __init__(self, out_dir=None, *, job=None, rank_dir=None, history_max_entries=DEFAULT_HISTORY_ENTRIES,
                 save_on_request=True, request_poll_every=10):
        super().__init__()
        self.out_dir, self.job, self.rank_dir = out_dir, job, rank_dir
        self.history_max_entries = history_max_entries
        self.save_on_request, self.request_poll_every = save_on_request, max(1, request_poll_every)
        self.watch = None

    @never_raises("lightning")
    def on_fit_start(self, trainer, pl_module):
        if self.watch is not None:
            return
        device = pl_module.device if pl_module.device.type == "cuda" else None
        self.watch = StepWatch(self.out_dir or os.path.join(trainer.default_root_dir, "fragscope"), job=self.job,
                               rank_dir=self.rank_dir, device=device,
                               history_max_entries=self.history_max_entries or None)

    @never_raises("lightning")
    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        if self.watch:
            self.watch.step_begin()

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        # Whether to look for a request depends only on what every rank shares: the look is a collective.
        optimizer_step = (batch_idx + 1) % max(1, trainer.accumulate_grad_batches) == 0
        self._step_end(optimizer_step)
        if self.save_on_request and optimizer_step and trainer.global_step % self.request_poll_every == 0:
            self._save_if_requested(trainer, pl_module)

    @never_raises("lightning")
    def _step_end(self, optimizer_step):
        if self.watch:
            self.watch.step_end(optimizer_step=optimizer_step)

    def _save_if_requested(self, trainer, pl_module):
        """Saves when any rank was asked. Every rank runs this together and it holds collectives (the
        agreement, the save's barrier), so a failure in it is not swallowed: this rank would train on
        while the others wait in the barrier until the NCCL timeout. It reaches Lightning as the same
        failure in a ModelCheckpoint save would. Agreeing on the failure instead cannot be made safe: a
        strategy's save has collectives of its own (FSDP, DeepSpeed), and a rank failing among them
        leaves the ranks at points that no agreement afterwards can line up."""
        requested = self.watch.checkpoint_requested() if self.watch else False
        if not any_rank(requested, pl_module.device):
            return
        with self.watch.phase("checkpoint") if self.watch else contextlib.nullcontext():
            trainer.save_checkpoint(self._request_path(trainer))
        self._acknowledge()

    @never_raises("lightning")
    def _acknowledge(self):
        if self.watch:
            self.watch.acknowledge_checkpoint()

    @staticmethod
    def _request_path(trainer):
        checkpoints = getattr(trainer, "checkpoint_callback", None)
        folder = getattr(checkpoints, "dirpath", None) or os.path.join(trainer.default_root_dir, "checkpoints")
        return os.path.join(folder, f"fragscope-request-step{trainer.global_step}.ckpt")

    @never_raises("lightning")
    def on_validation_start(self, trainer, pl_module):
        if self.watch:
            self.watch.set_phase("eval")

    @never_raises("lightning")
    def on_validation_end(self, trainer, pl_module):
        if self.watch:
            self.watch.set_phase("train")
            self.watch.restart_clock()

    @never_raises("lightning")
    def on_exception(self, trainer, pl_module, exception):
        if self.watch:
            self.watch.on_error(exception)

    @never_raises("lightning")
    def teardown(self, trainer, pl_module, stage):
        if self.watch and stage == "fit":
            self.watch.close()
            self.watch = None
