"""Point-cloud classification with DGCNN (dynamic graph CNN), as its reference training loop runs it, on random
point clouds.

EdgeConv layers rebuild a k-nearest-neighbour graph in feature space at every layer (pairwise distances: a
points x points matrix per cloud), gather each point's neighbours and max-pool the edge features; clouds of
1,024-4,096 points per batch, fp32, Adam with cosine annealing, label-smoothed cross-entropy. Memory history is
started at step 1 (after a warm-up step); the snapshot is dumped in an `except` handler around the loop.
"""
import argparse, random
import torch, torch.nn as nn, torch.nn.functional as F

p = argparse.ArgumentParser()
p.add_argument("--batch", type=int, default=32)
p.add_argument("--k", type=int, default=20)
p.add_argument("--steps", type=int, default=16)
p.add_argument("--points", default="1024,2048,3072,4096")
p.add_argument("--max-entries", type=int, default=100000)
args = p.parse_args()


def knn(x, k):  # x: B x C x N
    inner = -2 * torch.matmul(x.transpose(2, 1), x)
    xx = (x ** 2).sum(1, keepdim=True)
    return (-xx - inner - xx.transpose(2, 1)).topk(k=k, dim=-1)[1]


def edge_features(x, k):
    b, c, n = x.shape
    idx = (knn(x, k) + torch.arange(b, device=x.device).view(-1, 1, 1) * n).view(-1)
    flat = x.transpose(2, 1).contiguous()
    neighbours = flat.view(b * n, -1)[idx].view(b, n, k, c)
    centre = flat.view(b, n, 1, c).expand(-1, -1, k, -1)
    return torch.cat((neighbours - centre, centre), 3).permute(0, 3, 1, 2).contiguous()


class DGCNN(nn.Module):
    def __init__(self, k, classes=40):
        super().__init__()
        self.k = k
        dims = [(6, 64), (128, 64), (128, 128), (256, 256)]
        self.convs = nn.ModuleList([nn.Sequential(nn.Conv2d(i, o, 1, bias=False), nn.BatchNorm2d(o),
                                                  nn.LeakyReLU(0.2)) for i, o in dims])
        self.fuse = nn.Sequential(nn.Conv1d(512, 1024, 1, bias=False), nn.BatchNorm1d(1024), nn.LeakyReLU(0.2))
        self.head = nn.Sequential(nn.Linear(2048, 512, bias=False), nn.BatchNorm1d(512), nn.LeakyReLU(0.2),
                                  nn.Dropout(0.5), nn.Linear(512, classes))

    def forward(self, x):
        outs = []
        for conv in self.convs:
            x = conv(edge_features(x, self.k)).max(dim=-1)[0]
            outs.append(x)
        x = self.fuse(torch.cat(outs, 1))
        return self.head(torch.cat((x.amax(-1), x.mean(-1)), 1))


model = DGCNN(args.k).cuda()
opt = torch.optim.Adam(model.parameters(), lr=1e-3, weight_decay=1e-4)
sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, args.steps)
sizes = [int(s) for s in args.points.split(",")]
rng = random.Random(11)


def train():
    for step in range(args.steps):
        if step == 1:
            torch.cuda.memory._record_memory_history(max_entries=args.max_entries)
        n = rng.choice(sizes)
        x = torch.randn(args.batch, 3, n, device="cuda")
        y = torch.randint(0, 40, (args.batch,), device="cuda")
        loss = F.cross_entropy(model(x), y, label_smoothing=0.2)
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        if step % 4 == 0:
            print(f"step {step} points {n} loss {loss.item():.3f}", flush=True)


try:
    train()
except torch.OutOfMemoryError:
    torch.cuda.memory._dump_snapshot("oom_snapshot.pickle")
    raise
