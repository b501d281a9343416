"""An ODE-Net image classifier (Chen et al., "Neural Ordinary Differential Equations") as its tutorials write it
without torchdiffeq: a convolutional stem, one ODE block whose dynamics are GroupNorm-ReLU-ConcatConv twice,
integrated from t=0 to 1 by a hand-written adaptive Dormand-Prince 5(4) solver (FSAL, rejected steps dropped), and
back-propagated straight through the solver's steps (no adjoint), so the memory of a step grows with the number of
function evaluations the solver takes; fp32, SGD with momentum. Random images and labels. History from the start;
the snapshot is dumped in the except handler.
"""
import argparse
import torch, torch.nn as nn, torch.nn.functional as F

p = argparse.ArgumentParser()
p.add_argument("--batch", type=int, default=128)
p.add_argument("--channels", type=int, default=64)
p.add_argument("--size", type=int, default=64)
p.add_argument("--tol", type=float, default=1e-3)
p.add_argument("--max-solver-steps", type=int, default=24)
p.add_argument("--steps", type=int, default=14)
p.add_argument("--max-entries", type=int, default=120000)
args = p.parse_args()

A = [[], [1 / 5], [3 / 40, 9 / 40], [44 / 45, -56 / 15, 32 / 9],
     [19372 / 6561, -25360 / 2187, 64448 / 6561, -212 / 729],
     [9017 / 3168, -355 / 33, 46732 / 5247, 49 / 176, -5103 / 18656],
     [35 / 384, 0, 500 / 1113, 125 / 192, -2187 / 6784, 11 / 84]]
C = [0, 1 / 5, 3 / 10, 4 / 5, 8 / 9, 1, 1]
B5 = A[6] + [0]
B4 = [5179 / 57600, 0, 7571 / 16695, 393 / 640, -92097 / 339200, 187 / 2100, 1 / 40]


class ConcatConv(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.conv = nn.Conv2d(c + 1, c, 3, 1, 1)

    def forward(self, t, x):
        return self.conv(torch.cat([torch.ones_like(x[:, :1]) * t, x], 1))


class ODEFunc(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.norm1, self.norm2, self.norm3 = nn.GroupNorm(32, c), nn.GroupNorm(32, c), nn.GroupNorm(32, c)
        self.conv1, self.conv2 = ConcatConv(c), ConcatConv(c)
        self.nfe = 0

    def forward(self, t, x):
        self.nfe += 1
        out = self.conv1(t, F.relu(self.norm1(x)))
        return self.norm3(self.conv2(t, F.relu(self.norm2(out))))


def dopri5(f, y, t0=0.0, t1=1.0, tol=1e-3, max_steps=24):
    t, h = t0, 0.1
    k1 = f(t, y)
    for _ in range(max_steps):
        h = min(h, t1 - t)
        ks = [k1]
        for i in range(1, 7):
            yi = y + h * sum(a * k for a, k in zip(A[i], ks) if a)
            ks.append(f(t + C[i] * h, yi))
        y5 = y + h * sum(b * k for b, k in zip(B5, ks) if b)
        err = h * sum((b5 - b4) * k for b5, b4, k in zip(B5, B4, ks) if b5 != b4)
        scale = tol + tol * torch.maximum(y.abs(), y5.abs())
        ratio = (err / scale).pow(2).mean().sqrt().item()
        if ratio <= 1 or h < 1e-3:
            t, y, k1 = t + h, y5, ks[6]
            if t >= t1 - 1e-9:
                break
        h = h * min(10.0, max(0.2, 0.9 * max(ratio, 1e-10) ** -0.2))
    return y


class ODENet(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, c, 3, 1, 1), nn.GroupNorm(32, c), nn.ReLU(inplace=True),
                                  nn.Conv2d(c, c, 4, 2, 1), nn.GroupNorm(32, c), nn.ReLU(inplace=True))
        self.func = ODEFunc(c)
        self.head = nn.Sequential(nn.GroupNorm(32, c), nn.ReLU(inplace=True), nn.AdaptiveAvgPool2d(1),
                                  nn.Flatten(), nn.Linear(c, 10))

    def forward(self, x):
        return self.head(dopri5(self.func, self.stem(x), tol=args.tol, max_steps=args.max_solver_steps))


torch.cuda.memory._record_memory_history(max_entries=args.max_entries)
torch.manual_seed(0)
model = ODENet(args.channels).cuda()
opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-4)
images = torch.randn(16 * args.batch, 3, args.size, args.size)
labels = torch.randint(0, 10, (16 * args.batch,))
try:
    for step in range(args.steps):
        i = (step % 16) * args.batch
        x, y = images[i:i + args.batch].cuda(non_blocking=True), labels[i:i + args.batch].cuda(non_blocking=True)
        model.func.nfe = 0
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        print(f"step {step}: loss {loss.item():.3f} nfe {model.func.nfe}", flush=True)
except torch.OutOfMemoryError:
    torch.cuda.memory._dump_snapshot("oom_snapshot.pickle")
    raise
