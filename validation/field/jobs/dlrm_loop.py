"""A DLRM-style click-through model as the DLRM reference implementation and TorchRec's tutorial write it, in a
plain loop: dense features through a bottom MLP, --tables categorical features (multi-hot, --bag ids each)
through nn.EmbeddingBag tables (sum pooling, dense gradients), the pairwise dot products of all feature
vectors (bmm, upper triangle), a top MLP and binary cross-entropy; a fixed batch; Adam, whose first step
makes two fp32 copies of every table. History from the start; the snapshot is dumped by the OOM observer.
"""
import argparse
import torch, torch.nn as nn, torch.nn.functional as F

p = argparse.ArgumentParser()
p.add_argument("--tables", type=int, default=8)
p.add_argument("--rows", type=int, default=1_000_000)
p.add_argument("--dim", type=int, default=128)
p.add_argument("--bag", type=int, default=16)
p.add_argument("--batch", type=int, default=16384)
p.add_argument("--steps", type=int, default=8)
args = p.parse_args()

torch.cuda.memory._record_memory_history(max_entries=100000)


def oom_observer(device, alloc, device_alloc, device_free):
    torch.cuda.memory._dump_snapshot("oom_snapshot.pickle")


torch._C._cuda_attach_out_of_memory_observer(oom_observer)


def mlp(sizes):
    layers = []
    for a, b in zip(sizes[:-1], sizes[1:]):
        layers += [nn.Linear(a, b), nn.ReLU()]
    return nn.Sequential(*layers[:-1])


class DLRM(nn.Module):
    def __init__(self):
        super().__init__()
        d = args.dim
        self.bottom = mlp([13, 512, 256, d])
        self.tables = nn.ModuleList(nn.EmbeddingBag(args.rows, d, mode="sum", device="cuda")
                                    for _ in range(args.tables))
        features = args.tables + 1
        self.pairs = torch.triu_indices(features, features, offset=1)
        self.top = mlp([d + features * (features - 1) // 2, 1024, 512, 256, 1])

    def forward(self, dense, sparse):
        x = self.bottom(dense)
        vectors = torch.stack([x] + [t(sparse[:, i].contiguous()) for i, t in enumerate(self.tables)], dim=1)
        dots = torch.bmm(vectors, vectors.transpose(1, 2))[:, self.pairs[0], self.pairs[1]]
        return self.top(torch.cat([x, dots], dim=1)).squeeze(1)


model = DLRM().cuda()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
for step in range(args.steps):
    dense = torch.randn(args.batch, 13, device="cuda")
    sparse = torch.randint(0, args.rows, (args.batch, args.tables, args.bag), device="cuda")
    clicks = torch.randint(0, 2, (args.batch,), device="cuda").float()
    loss = F.binary_cross_entropy_with_logits(model(dense, sparse), clicks)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"step {step} loss {loss.item():.4f}", flush=True)
