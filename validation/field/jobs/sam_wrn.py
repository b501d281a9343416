"""Sharpness-Aware Minimization as davda54/sam (the most-copied PyTorch SAM) trains it in example/train.py: a
`SAM` optimizer wrapping SGD (momentum 0.9, weight decay 5e-4), whose first_step saves each parameter
(state[p]["old_p"] = p.data.clone()) and climbs to w + e(w) along the gradient scaled by rho / ||g|| (times w^2
with --adaptive: ASAM), and whose second_step puts the saved parameters back (p.data = old_p) and lets SGD step
with the gradient taken there; so every step runs two forward-backward passes, the second with BatchNorm running
stats bypassed (momentum 0). The model is the repo's Wide ResNet (pre-activation BN-ReLU-conv units, a 1x1
projection in each stage's first unit, dropout 0; WRN-28-10 by default), the loss its label-smoothed
cross-entropy. fp32 (the repo has no AMP). Random images normalized like CIFAR-100 (seeded, built on the CPU and
moved to the GPU per step as a loader would), random labels. History is turned on at step --history-from (a
mid-run start, ring of --max-entries); the snapshot is dumped in the except handler.
"""
import argparse
import torch, torch.nn as nn, torch.nn.functional as F

p = argparse.ArgumentParser()
p.add_argument("--depth", type=int, default=28)
p.add_argument("--width", type=int, default=10)
p.add_argument("--dropout", type=float, default=0.0)
p.add_argument("--size", type=int, default=32)
p.add_argument("--classes", type=int, default=100)
p.add_argument("--batch", type=int, default=512)
p.add_argument("--steps", type=int, default=10)
p.add_argument("--lr", type=float, default=0.1)
p.add_argument("--rho", type=float, default=0.05)
p.add_argument("--adaptive", action="store_true")
p.add_argument("--history-from", type=int, default=2)
p.add_argument("--max-entries", type=int, default=200000)
args = p.parse_args()


class SAM(torch.optim.Optimizer):
    def __init__(self, params, base_optimizer, rho=0.05, adaptive=False, **kwargs):
        assert rho >= 0.0, f"rho must be non-negative, got {rho}"
        super().__init__(params, dict(rho=rho, adaptive=adaptive, **kwargs))
        self.base_optimizer = base_optimizer(self.param_groups, **kwargs)
        self.param_groups = self.base_optimizer.param_groups
        self.defaults.update(self.base_optimizer.defaults)

    @torch.no_grad()
    def first_step(self, zero_grad=False):
        grad_norm = self._grad_norm()
        for group in self.param_groups:
            scale = group["rho"] / (grad_norm + 1e-12)
            for p in group["params"]:
                if p.grad is None:
                    continue
                self.state[p]["old_p"] = p.data.clone()
                e_w = (torch.pow(p, 2) if group["adaptive"] else 1.0) * p.grad * scale.to(p)
                p.add_(e_w)  # w + e(w): the worst case nearby
        if zero_grad:
            self.zero_grad()

    @torch.no_grad()
    def second_step(self, zero_grad=False):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                p.data = self.state[p]["old_p"]  # back to w
        self.base_optimizer.step()  # with the gradient taken at w + e(w)
        if zero_grad:
            self.zero_grad()

    def _grad_norm(self):
        device = self.param_groups[0]["params"][0].device
        return torch.norm(torch.stack([((torch.abs(p) if group["adaptive"] else 1.0) * p.grad).norm(p=2).to(device)
                                       for group in self.param_groups for p in group["params"]
                                       if p.grad is not None]), p=2)


def enable_running_stats(model):
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d) and hasattr(m, "backup_momentum"):
            m.momentum = m.backup_momentum


def disable_running_stats(model):
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.backup_momentum = m.momentum
            m.momentum = 0


def smooth_crossentropy(pred, gold, smoothing=0.1):
    target = torch.full_like(pred, smoothing / (pred.size(1) - 1))
    target.scatter_(1, gold.unsqueeze(1), 1.0 - smoothing)
    return F.kl_div(F.log_softmax(pred, dim=1), target, reduction="none").sum(-1)


def bn_relu(channels):
    return [nn.BatchNorm2d(channels), nn.ReLU(inplace=True)]


def conv3x3(cin, cout, stride=1):
    return nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False)


class BasicUnit(nn.Module):
    def __init__(self, channels, dropout):
        super().__init__()
        self.block = nn.Sequential(*bn_relu(channels), conv3x3(channels, channels), *bn_relu(channels),
                                   nn.Dropout(dropout, inplace=True), conv3x3(channels, channels))

    def forward(self, x):
        return x + self.block(x)


class DownsampleUnit(nn.Module):
    def __init__(self, cin, cout, stride, dropout):
        super().__init__()
        self.norm_act = nn.Sequential(*bn_relu(cin))
        self.block = nn.Sequential(conv3x3(cin, cout, stride), *bn_relu(cout), nn.Dropout(dropout, inplace=True),
                                   conv3x3(cout, cout))
        self.downsample = nn.Conv2d(cin, cout, 1, stride=stride, bias=False)

    def forward(self, x):
        x = self.norm_act(x)
        return self.block(x) + self.downsample(x)


class WideResNet(nn.Module):
    def __init__(self, depth, width_factor, dropout, labels, size):
        super().__init__()
        filters = [16, 16 * width_factor, 32 * width_factor, 64 * width_factor]
        units = (depth - 4) // 6
        layers = [conv3x3(3, filters[0])]
        for i, stride in enumerate((1, 2, 2)):
            layers.append(DownsampleUnit(filters[i], filters[i + 1], stride, dropout))
            layers += [BasicUnit(filters[i + 1], dropout) for _ in range(units)]
        self.f = nn.Sequential(*layers, *bn_relu(filters[3]), nn.AvgPool2d(size // 4), nn.Flatten(),
                               nn.Linear(filters[3], labels))
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_in", nonlinearity="relu")
            elif isinstance(m, nn.Linear):
                nn.init.zeros_(m.weight)
                nn.init.zeros_(m.bias)

    def forward(self, x):
        return self.f(x)


torch.manual_seed(0)
device = torch.device("cuda")
model = WideResNet(args.depth, args.width, args.dropout, args.classes, args.size).to(device)
optimizer = SAM(model.parameters(), torch.optim.SGD, rho=args.rho, adaptive=args.adaptive, lr=args.lr,
                momentum=0.9, weight_decay=5e-4)
mean = torch.tensor([0.5071, 0.4865, 0.4409]).view(3, 1, 1)
std = torch.tensor([0.2673, 0.2564, 0.2762]).view(3, 1, 1)
gen = torch.Generator().manual_seed(1)
model.train()
try:
    for step in range(args.steps):
        if step == args.history_from:
            torch.cuda.memory._record_memory_history(max_entries=args.max_entries)
        images = (torch.rand(args.batch, 3, args.size, args.size, generator=gen) - mean) / std
        labels = torch.randint(0, args.classes, (args.batch,), generator=gen)
        inputs, targets = images.to(device), labels.to(device)

        enable_running_stats(model)
        predictions = model(inputs)
        loss = smooth_crossentropy(predictions, targets, smoothing=0.1)
        loss.mean().backward()
        optimizer.first_step(zero_grad=True)

        disable_running_stats(model)
        smooth_crossentropy(model(inputs), targets, smoothing=0.1).mean().backward()
        optimizer.second_step(zero_grad=True)

        with torch.no_grad():
            correct = torch.argmax(predictions.data, 1) == targets
            print(f"step {step}/{args.steps} loss {loss.mean().item():.3f} acc {correct.float().mean().item():.3f} "
                  f"lr {optimizer.param_groups[0]['lr']:.3f}", flush=True)
except torch.OutOfMemoryError:
    torch.cuda.memory._dump_snapshot("oom_snapshot.pickle")
    raise
