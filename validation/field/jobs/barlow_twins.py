"""Barlow Twins (Zbontar et al.), as facebookresearch/barlowtwins trains it: a torchvision ResNet-50 backbone, a
3-layer projector of --proj units with BatchNorm, two augmented views of each image (random resized crops and
flips, done on the GPU batch here), the cross-correlation matrix of the two views' normalised embeddings (proj x
proj, fp32) and its on- and off-diagonal loss, LARS-style SGD with momentum (plain SGD with the LARS trust ratio
applied per parameter, as the repository's LARS class does), bf16 autocast, channels_last. Random images. History
from the start; the snapshot is dumped in the except handler.
"""
import argparse
import torch, torch.nn as nn, torch.nn.functional as F, torchvision

p = argparse.ArgumentParser()
p.add_argument("--batch", type=int, default=192)
p.add_argument("--proj", type=int, default=8192)
p.add_argument("--res", type=int, default=224)
p.add_argument("--steps", type=int, default=12)
p.add_argument("--lambd", type=float, default=0.0051)
p.add_argument("--max-entries", type=int, default=100000)
args = p.parse_args()


class BarlowTwins(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = torchvision.models.resnet50()
        self.backbone.fc = nn.Identity()
        sizes = [2048, args.proj, args.proj, args.proj]
        layers = []
        for a, b in zip(sizes[:-2], sizes[1:-1]):
            layers += [nn.Linear(a, b, bias=False), nn.BatchNorm1d(b), nn.ReLU(inplace=True)]
        layers.append(nn.Linear(sizes[-2], sizes[-1], bias=False))
        self.projector = nn.Sequential(*layers)
        self.bn = nn.BatchNorm1d(sizes[-1], affine=False)

    def forward(self, y1, y2):
        z1 = self.projector(self.backbone(y1))
        z2 = self.projector(self.backbone(y2))
        c = self.bn(z1.float()).T @ self.bn(z2.float()) / len(y1)
        on_diag = torch.diagonal(c).add_(-1).pow_(2).sum()
        off_diag = c.flatten()[:-1].view(args.proj - 1, args.proj + 1)[:, 1:].pow_(2).sum()
        return on_diag + args.lambd * off_diag


@torch.no_grad()
def lars_step(params, lr, momentum=0.9, weight_decay=1.5e-6, eta=0.001):
    for p_ in params:
        if p_.grad is None:
            continue
        g = p_.grad
        if p_.ndim > 1:
            g = g.add(p_, alpha=weight_decay)
            p_norm, g_norm = torch.norm(p_), torch.norm(g)
            q = torch.where(p_norm > 0., torch.where(g_norm > 0, (eta * p_norm / g_norm), 1.0), 1.0)
            g = g.mul(q)
        state = states.setdefault(p_, torch.zeros_like(p_))
        state.mul_(momentum).add_(g)
        p_.add_(state, alpha=-lr)


def views(batch):
    images = torch.rand(batch, 3, 256, 256, device="cuda")
    out = []
    for _ in range(2):
        top, left = torch.randint(0, 256 - args.res + 1, (2,)).tolist()
        v = images[:, :, top:top + args.res, left:left + args.res]
        if torch.rand(()) < 0.5:
            v = v.flip(3)
        out.append(v.contiguous(memory_format=torch.channels_last))
    return out


torch.cuda.memory._record_memory_history(max_entries=args.max_entries)
model = BarlowTwins().cuda().to(memory_format=torch.channels_last)
states = {}
try:
    for step in range(args.steps):
        y1, y2 = views(args.batch)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(y1, y2)
        model.zero_grad(set_to_none=True)
        loss.backward()
        lars_step(list(model.parameters()), lr=0.2)
        if step % 4 == 0:
            print(f"step {step}: loss {loss.item():.1f}", flush=True)
except torch.OutOfMemoryError:
    torch.cuda.memory._dump_snapshot("oom_snapshot.pickle")
    raise
