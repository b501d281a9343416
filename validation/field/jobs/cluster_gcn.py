"""Cluster-GCN (Chiang et al.), as its PyTorch ports train a large graph: the nodes are partitioned into clusters
(METIS in the paper; here clusters of lognormal sizes), each batch is --clusters random clusters and the edges
among them, a --layers GraphSAGE-mean network in plain torch (messages gathered by edge, summed by index_add_,
divided by the in-degree), node features gathered from a feature table on the GPU, cross-entropy on the batch's
training nodes, Adam. The batch's node and edge counts change with its clusters, so each step has its own size.
History from the start; the snapshot is dumped in the except handler.
"""
import argparse
import torch, torch.nn as nn, torch.nn.functional as F

p = argparse.ArgumentParser()
p.add_argument("--nodes", type=int, default=2_000_000)
p.add_argument("--features", type=int, default=128)
p.add_argument("--hidden", type=int, default=512)
p.add_argument("--layers", type=int, default=3)
p.add_argument("--classes", type=int, default=47)
p.add_argument("--cluster-median", type=int, default=6000)
p.add_argument("--clusters", type=int, default=12)
p.add_argument("--degree", type=int, default=24)
p.add_argument("--steps", type=int, default=30)
p.add_argument("--max-entries", type=int, default=100000)
args = p.parse_args()


class SAGELayer(nn.Module):
    def __init__(self, d_in, d_out):
        super().__init__()
        self.self_lin = nn.Linear(d_in, d_out)
        self.neigh_lin = nn.Linear(d_in, d_out)

    def forward(self, h, src, dst, inv_degree):
        agg = torch.zeros_like(h).index_add_(0, dst, h[src]) * inv_degree
        return self.self_lin(h) + self.neigh_lin(agg)


class GraphSAGE(nn.Module):
    def __init__(self):
        super().__init__()
        dims = [args.features] + [args.hidden] * (args.layers - 1) + [args.classes]
        self.layers = nn.ModuleList(SAGELayer(a, b) for a, b in zip(dims, dims[1:]))
        self.norms = nn.ModuleList(nn.LayerNorm(d) for d in dims[1:-1])

    def forward(self, x, src, dst, inv_degree):
        for k, layer in enumerate(self.layers):
            x = layer(x, src, dst, inv_degree)
            if k < len(self.norms):
                x = F.dropout(F.relu(self.norms[k](x)), 0.2, self.training)
        return x


gen = torch.Generator().manual_seed(3)
sizes = torch.empty(args.nodes // args.cluster_median * 2).log_normal_(0, 0.6, generator=gen)
sizes = (sizes * args.cluster_median).long().clamp(min=200)
sizes = sizes[:int((sizes.cumsum(0) <= args.nodes).sum())]
starts = torch.cat([torch.zeros(1, dtype=torch.long), sizes.cumsum(0)[:-1]]).tolist()
sizes = sizes.tolist()

torch.cuda.memory._record_memory_history(max_entries=args.max_entries)
features = torch.randn(args.nodes, args.features, device="cuda")
labels = torch.randint(0, args.classes, (args.nodes,), device="cuda")
train_mask = torch.rand(args.nodes, device="cuda") < 0.6
model = GraphSAGE().cuda()
opt = torch.optim.Adam(model.parameters(), lr=5e-3)
try:
    for step in range(args.steps):
        picked = torch.randperm(len(sizes), generator=gen)[:args.clusters]
        nodes = torch.cat([torch.arange(starts[c], starts[c] + sizes[c]) for c in picked.tolist()]).cuda()
        n = len(nodes)
        src = torch.randint(0, n, (n * args.degree,), device="cuda")
        dst = torch.randint(0, n, (n * args.degree,), device="cuda")
        inv_degree = 1 / torch.bincount(dst, minlength=n).clamp(min=1).unsqueeze(1).float()
        out = model(features[nodes], src, dst, inv_degree)
        mask = train_mask[nodes]
        loss = F.cross_entropy(out[mask], labels[nodes][mask])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if step % 5 == 0:
            print(f"step {step}: {n} nodes, {n * args.degree} edges, loss {loss.item():.3f}", flush=True)
except torch.OutOfMemoryError:
    torch.cuda.memory._dump_snapshot("oom_snapshot.pickle")
    raise
