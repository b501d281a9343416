"""Graph classification with a message-passing network written in plain PyTorch, as PyG's examples batch
molecules and meshes: each step packs --graphs random graphs (node counts vary per graph, so every batch has
another size) into one disjoint union; each layer gathers its edges' endpoints (x[dst], x[src]), makes a
message per edge, sums the messages into their destination with index_add_, then updates every node; graphs
are mean-pooled. fp32, Adam. History is turned on at step --history-from-step (after the first steps ran);
the snapshot is dumped in the except handler.
"""
import argparse, random
import torch, torch.nn as nn, torch.nn.functional as F

p = argparse.ArgumentParser()
p.add_argument("--hidden", type=int, default=256)
p.add_argument("--layers", type=int, default=6)
p.add_argument("--graphs", type=int, default=32)
p.add_argument("--max-nodes", type=int, default=2000)
p.add_argument("--degree", type=int, default=8)
p.add_argument("--steps", type=int, default=14)
p.add_argument("--history-from-step", type=int, default=2)
args = p.parse_args()


class MessagePassing(nn.Module):
    def __init__(self, h):
        super().__init__()
        self.message = nn.Linear(2 * h, h)
        self.update = nn.Sequential(nn.Linear(2 * h, h), nn.ReLU(), nn.Linear(h, h))
        self.norm = nn.LayerNorm(h)

    def forward(self, x, src, dst):
        m = F.relu(self.message(torch.cat([x[dst], x[src]], dim=1)))
        aggregated = torch.zeros_like(x).index_add_(0, dst, m)
        return self.norm(x + self.update(torch.cat([x, aggregated], dim=1)))


class GraphClassifier(nn.Module):
    def __init__(self, features, h, layers, classes):
        super().__init__()
        self.embed = nn.Linear(features, h)
        self.layers = nn.ModuleList(MessagePassing(h) for _ in range(layers))
        self.head = nn.Linear(h, classes)

    def forward(self, features, src, dst, graph_of, graphs):
        x = self.embed(features)
        for layer in self.layers:
            x = layer(x, src, dst)
        pooled = torch.zeros(graphs, x.size(1), device=x.device).index_add_(0, graph_of, x)
        counts = torch.bincount(graph_of, minlength=graphs).clamp(min=1).unsqueeze(1)
        return self.head(pooled / counts)


def make_batch(rng, gen):
    sizes = [rng.randint(args.max_nodes // 4, args.max_nodes) for _ in range(args.graphs)]
    srcs, dsts, owners, offset = [], [], [], 0
    for g, n in enumerate(sizes):
        dsts.append(offset + torch.arange(n).repeat_interleave(args.degree))
        srcs.append(offset + torch.randint(0, n, (n * args.degree,), generator=gen))
        owners.append(torch.full((n,), g, dtype=torch.long))
        offset += n
    features = torch.randn(offset, 16, generator=gen)
    labels = torch.randint(0, 10, (args.graphs,), generator=gen)
    return [t.cuda() for t in (features, torch.cat(srcs), torch.cat(dsts), torch.cat(owners), labels)], offset


model = GraphClassifier(16, args.hidden, args.layers, 10).cuda()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
rng, gen = random.Random(0), torch.Generator().manual_seed(0)
try:
    for step in range(args.steps):
        if step == args.history_from_step:
            torch.cuda.memory._record_memory_history(max_entries=100000)
        (features, src, dst, graph_of, labels), nodes = make_batch(rng, gen)
        loss = F.cross_entropy(model(features, src, dst, graph_of, args.graphs), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        print(f"step {step} nodes {nodes} edges {src.numel()} loss {loss.item():.3f}", flush=True)
except torch.OutOfMemoryError:
    torch.cuda.memory._dump_snapshot("oom_snapshot.pickle")
    raise
