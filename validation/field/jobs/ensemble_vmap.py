"""An ensemble trained in one pass with torch.func, as PyTorch's "Model ensembling" tutorial stacks it and deep
ensemble codebases train it: --members copies of a small ConvNet (different inits), their weights stacked by
stack_module_state into leaf tensors that Adam updates, and the forward vmapped over the members with
functional_call, each member on its own bootstrap resample of the batch (in_dims 0 for the data). Random 64 x 64
images, a per-member cross-entropy summed. Every --eval-every steps the ensemble's mean prediction on a larger batch
under torch.no_grad (one input for all members). History from step --history-from; the snapshot is dumped in the
except handler.
"""
import argparse, copy
import torch, torch.nn as nn, torch.nn.functional as F
from torch.func import functional_call, stack_module_state

p = argparse.ArgumentParser()
p.add_argument("--members", type=int, default=8)
p.add_argument("--batch", type=int, default=128)
p.add_argument("--width", type=int, default=128)
p.add_argument("--image", type=int, default=64)
p.add_argument("--steps", type=int, default=14)
p.add_argument("--eval-every", type=int, default=5)
p.add_argument("--history-from", type=int, default=2)
p.add_argument("--max-entries", type=int, default=100000)
args = p.parse_args()


class ConvNet(nn.Module):
    def __init__(self, w):
        super().__init__()
        self.c1, self.c2, self.c3 = nn.Conv2d(3, w, 3, padding=1), nn.Conv2d(w, 2 * w, 3, padding=1), \
            nn.Conv2d(2 * w, 4 * w, 3, padding=1)
        self.fc = nn.Linear(4 * w, 200)

    def forward(self, x):
        x = F.max_pool2d(F.gelu(self.c1(x)), 2)
        x = F.max_pool2d(F.gelu(self.c2(x)), 2)
        x = F.gelu(self.c3(x))
        return self.fc(x.mean((2, 3)))


torch.manual_seed(0)
members = [ConvNet(args.width).cuda() for _ in range(args.members)]
params, buffers = stack_module_state(members)
base = copy.deepcopy(members[0]).to("meta")
del members
opt = torch.optim.Adam(params.values(), lr=1e-3)


def one(p, b, x):
    return functional_call(base, (p, b), (x,))


try:
    for step in range(args.steps):
        if step == args.history_from:
            torch.cuda.memory._record_memory_history(max_entries=args.max_entries)
        x = torch.randn(args.batch, 3, args.image, args.image, device="cuda")
        y = torch.randint(0, 200, (args.batch,), device="cuda")
        resample = torch.randint(0, args.batch, (args.members, args.batch), device="cuda")
        logits = torch.vmap(one, in_dims=(0, 0, 0))(params, buffers, x[resample])
        loss = F.cross_entropy(logits.flatten(0, 1), y[resample].flatten(), reduction="sum") / args.batch
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        print(f"step {step}: loss {loss.item() / args.members:.3f}", flush=True)
        if (step + 1) % args.eval_every == 0:
            with torch.no_grad():
                x = torch.randn(4 * args.batch, 3, args.image, args.image, device="cuda")
                mean = torch.vmap(one, in_dims=(0, 0, None))(params, buffers, x).softmax(-1).mean(0)
            print(f"eval after {step}: confidence {mean.max(-1).values.mean().item():.3f}", flush=True)
except torch.OutOfMemoryError:
    torch.cuda.memory._dump_snapshot("oom_snapshot.pickle")
    raise
