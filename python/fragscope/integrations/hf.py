"""fragscope for Hugging Face `transformers.Trainer`: one callback, no change to the loop.

    from fragscope.integrations.hf import FragscopeCallback
    trainer = Trainer(model=model, args=args, train_dataset=ds, callbacks=[FragscopeCallback(job="sft")])

Each rank writes `<out_dir>/rank<R>/steps.jsonl` (default out_dir: `<output_dir>/fragscope`),
publishes its rank file for the node agent and, at an OOM, leaves the dump `fragscope doctor`
reads in the same folder (watch.py). A step is an optimizer step (on_step_begin to on_step_end);
its wait is the time the DataLoader took for its batches. Evaluation and checkpoint saving are
left out of the step times. When the agent asks for a checkpoint (all ranks agree, every
`request_poll_every` steps), the callback sets `control.should_save` and acknowledges once saved.
"""

import os

try:
    from transformers import TrainerCallback
except ImportError as missing:
    raise ImportError("fragscope.integrations.hf needs transformers (pip install transformers)") from missing

from ..capture import DEFAULT_HISTORY_ENTRIES
from ..notices import never_raises
from ..watch import StepWatch, any_rank


class FragscopeCallback(TrainerCallback):
    """history_max_entries: memory history ring (0 or None: off). save_on_request: let the node
    agent's checkpoint requests trigger a save. Other arguments as for StepWatch."""

    def __init__(self, out_dir=None, *, job=None, rank_dir=None, history_max_entries=DEFAULT_HISTORY_ENTRIES,
                 save_on_request=True, request_poll_every=10):
        self.out_dir, self.job, self.rank_dir = out_dir, job, rank_dir
        self.history_max_entries = history_max_entries
        self.save_on_request, self.request_poll_every = save_on_request, max(1, request_poll_every)
        self.watch = None
        self._save_requested = False

    @never_raises("hf")
    def on_train_begin(self, args, state, control, **kwargs):
        if self.watch is not None:
            return
        device = args.device if getattr(args.device, "type", "") == "cuda" else None
        self.watch = StepWatch(self.out_dir or os.path.join(args.output_dir, "fragscope"), job=self.job,
                               rank_dir=self.rank_dir, device=device,
                               history_max_entries=self.history_max_entries or None)

    @never_raises("hf")
    def on_step_begin(self, args, state, control, **kwargs):
        if self.watch:
            self.watch.step_begin()

    def on_step_end(self, args, state, control, **kwargs):
        self._step_end()
        if self.save_on_request and state.global_step % self.request_poll_every == 0:
            self._save_if_requested(args, control)

    @never_raises("hf")
    def _step_end(self):
        if self.watch:
            self.watch.step_end()

    def _save_if_requested(self, args, control):
        """Has the Trainer save when any rank was asked. Every rank runs this, with a watch or without:
        the agreement is a collective, so a failure in it is not swallowed (this rank would go on while
        the others block until the NCCL timeout); it reaches the Trainer as its own would."""
        requested = self.watch.checkpoint_requested() if self.watch else False
        if any_rank(requested, args.device):
            control.should_save = True
            self._save_requested = True

    @never_raises("hf")
    def on_prediction_step(self, args, state, control, **kwargs):
        if self.watch:
            self.watch.set_phase("eval")

    @never_raises("hf")
    def on_evaluate(self, args, state, control, **kwargs):
        if self.watch:
            self.watch.set_phase("train")
            self.watch.restart_clock()

    @never_raises("hf")
    def on_save(self, args, state, control, **kwargs):
        if not self.watch:
            return
        if self._save_requested:
            self._save_requested = False
            self.watch.acknowledge_checkpoint()
        self.watch.restart_clock()

    @never_raises("hf")
    def on_train_end(self, args, state, control, **kwargs):
        if self.watch:
            self.watch.close()
            self.watch = None
