"""Differentially private SGD as Opacus computes it, written with torch.func: per-sample gradients by
vmap(grad(...)) over a functional call of the model, each clipped to a norm, summed, noised, then an optimizer step.

A WideResNet-16-4 with GroupNorm (DP cannot use BatchNorm) on random 32x32 images, Poisson sampling: every example
joins a batch with probability --rate, so the batch size varies from step to step (its expectation is --batch);
SGD with momentum. The per-sample gradients hold batch x parameters floats. History from the start; the snapshot is
dumped in an `except` handler around the loop.
"""
import argparse
import torch, torch.nn as nn, torch.nn.functional as F
from torch.func import functional_call, grad, vmap

p = argparse.ArgumentParser()
p.add_argument("--batch", type=int, default=512)
p.add_argument("--width", type=int, default=4)
p.add_argument("--steps", type=int, default=12)
p.add_argument("--clip", type=float, default=1.0)
p.add_argument("--sigma", type=float, default=1.0)
p.add_argument("--max-entries", type=int, default=100000)
args = p.parse_args()
DATASET = 50000


class Block(nn.Module):
    def __init__(self, i, o, stride):
        super().__init__()
        self.n1, self.c1 = nn.GroupNorm(16, i), nn.Conv2d(i, o, 3, stride, 1, bias=False)
        self.n2, self.c2 = nn.GroupNorm(16, o), nn.Conv2d(o, o, 3, 1, 1, bias=False)
        self.skip = nn.Conv2d(i, o, 1, stride, bias=False) if (i != o or stride != 1) else None

    def forward(self, x):
        h = F.relu(self.n1(x))
        y = self.c2(F.relu(self.n2(self.c1(h))))
        return y + (self.skip(h) if self.skip is not None else x)


class WideResNet(nn.Module):
    def __init__(self, k, classes=10):
        super().__init__()
        w = [16, 16 * k, 32 * k, 64 * k]
        self.stem = nn.Conv2d(3, w[0], 3, 1, 1, bias=False)
        layers = []
        for g in range(3):
            for b in range(2):
                layers.append(Block(w[g] if b == 0 else w[g + 1], w[g + 1], (1 if g == 0 else 2) if b == 0 else 1))
        self.blocks = nn.Sequential(*layers)
        self.norm, self.fc = nn.GroupNorm(16, w[3]), nn.Linear(w[3], classes)

    def forward(self, x):
        x = F.relu(self.norm(self.blocks(self.stem(x))))
        return self.fc(x.mean((2, 3)))


model = WideResNet(args.width).cuda()
params = {k: v.detach() for k, v in model.named_parameters()}
opt = torch.optim.SGD(model.parameters(), lr=0.5, momentum=0.9)
gen = torch.Generator().manual_seed(5)


def loss_one(prm, x, y):
    out = functional_call(model, prm, (x.unsqueeze(0),))
    return F.cross_entropy(out, y.unsqueeze(0))


per_sample_grads = vmap(grad(loss_one), in_dims=(None, 0, 0))


def train():
    torch.cuda.memory._record_memory_history(max_entries=args.max_entries)
    rate = args.batch / DATASET
    for step in range(args.steps):
        n = int((torch.rand(DATASET, generator=gen) < rate).sum())  # Poisson sampling
        x = torch.randn(n, 3, 32, 32, device="cuda")
        y = torch.randint(0, 10, (n,), device="cuda")
        grads = per_sample_grads(params, x, y)
        norms = torch.stack([g.flatten(1).norm(dim=1) for g in grads.values()], 1).norm(dim=1)
        factor = (args.clip / (norms + 1e-6)).clamp(max=1.0)
        for name, prm in model.named_parameters():
            g = torch.einsum("b,b...->...", factor, grads[name])
            prm.grad = (g + torch.randn_like(g) * args.sigma * args.clip) / args.batch
        del grads
        opt.step()
        opt.zero_grad(set_to_none=True)
        print(f"step {step} batch {n}", flush=True)


try:
    train()
except torch.OutOfMemoryError:
    torch.cuda.memory._dump_snapshot("oom_snapshot.pickle")
    raise
