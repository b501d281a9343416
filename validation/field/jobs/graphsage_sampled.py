"""GraphSAGE with neighbour sampling in plain torch, as the PyG/DGL mini-batch tutorials train it but without either
library: a random power-law graph in CSR on the GPU (--nodes, node features and labels on the GPU), seed nodes drawn
per step, --fanouts neighbours sampled with replacement per node and hop, each hop's frontier made unique
(torch.unique with inverse indices), mean aggregation by index_add_, three SAGE layers (self and neighbour linears,
ReLU, dropout), cross-entropy on the seeds, Adam. Every --eval-every steps a larger seed batch under torch.no_grad.
The sampled subgraphs differ in size every step. History from the start; the snapshot is dumped in the except handler.
"""
import argparse
import torch, torch.nn as nn, torch.nn.functional as F

p = argparse.ArgumentParser()
p.add_argument("--nodes", type=int, default=2_000_000)
p.add_argument("--features", type=int, default=128)
p.add_argument("--hidden", type=int, default=512)
p.add_argument("--classes", type=int, default=47)
p.add_argument("--fanouts", default="15,10,5")
p.add_argument("--batch", type=int, default=4096)
p.add_argument("--eval-batch", type=int, default=16384)
p.add_argument("--steps", type=int, default=16)
p.add_argument("--eval-every", type=int, default=6)
p.add_argument("--max-entries", type=int, default=100000)
args = p.parse_args()
fanouts = [int(f) for f in args.fanouts.split(",")]

torch.manual_seed(0)
degree = (torch.distributions.Pareto(1.0, 1.2).sample((args.nodes,)) * 4).long().clamp(1, 2000).cuda()
rowptr = torch.zeros(args.nodes + 1, dtype=torch.long, device="cuda")
rowptr[1:] = degree.cumsum(0)
col = torch.randint(0, args.nodes, (int(rowptr[-1]),), device="cuda")
features = torch.randn(args.nodes, args.features, device="cuda")
labels = torch.randint(0, args.classes, (args.nodes,), device="cuda")


def sample(seeds):
    """Blocks from the seeds outwards: each is (source nodes, destination count, edge source and destination)."""
    blocks, frontier = [], seeds
    for fanout in fanouts:
        dst = frontier.repeat_interleave(fanout)
        pick = (torch.rand(dst.numel(), device="cuda") * degree[dst]).long()
        nbr = col[rowptr[dst] + pick]
        nodes, inverse = torch.unique(torch.cat([frontier, nbr]), return_inverse=True)
        # destinations first, as the next layer reads them by position
        is_dst = torch.zeros(nodes.numel(), dtype=torch.bool, device="cuda")
        is_dst[inverse[:frontier.numel()]] = True
        order = torch.cat([inverse[:frontier.numel()], torch.nonzero(~is_dst).squeeze(1)])
        position = torch.empty_like(order)
        position[order] = torch.arange(order.numel(), device="cuda")
        edge_src = position[inverse[frontier.numel():]]
        edge_dst = torch.arange(frontier.numel(), device="cuda").repeat_interleave(fanout)
        blocks.append((nodes[order], frontier.numel(), edge_src, edge_dst))
        frontier = nodes[order]
    return blocks[::-1]


class SAGE(nn.Module):
    def __init__(self):
        super().__init__()
        dims = [args.features] + [args.hidden] * (len(fanouts) - 1) + [args.classes]
        self.self_lin = nn.ModuleList(nn.Linear(a, b) for a, b in zip(dims[:-1], dims[1:]))
        self.neigh_lin = nn.ModuleList(nn.Linear(a, b, bias=False) for a, b in zip(dims[:-1], dims[1:]))

    def forward(self, blocks):
        x = features[blocks[0][0]]
        for i, (_, n_dst, edge_src, edge_dst) in enumerate(blocks):
            agg = x.new_zeros(n_dst, x.shape[1]).index_add_(0, edge_dst, x[edge_src]) / fanouts[len(blocks) - 1 - i]
            x = self.self_lin[i](x[:n_dst]) + self.neigh_lin[i](agg)
            if i < len(blocks) - 1:
                x = F.dropout(F.relu(x), 0.5, self.training)
        return x


torch.cuda.memory._record_memory_history(max_entries=args.max_entries)
model = SAGE().cuda()
opt = torch.optim.Adam(model.parameters(), lr=3e-3)
try:
    for step in range(args.steps):
        seeds = torch.randint(0, args.nodes, (args.batch,), device="cuda").unique()
        blocks = sample(seeds)
        loss = F.cross_entropy(model(blocks), labels[seeds])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        print(f"step {step}: nodes {blocks[0][0].numel()} loss {loss.item():.3f}", flush=True)
        if (step + 1) % args.eval_every == 0:
            model.eval()
            with torch.no_grad():
                seeds = torch.randint(0, args.nodes, (args.eval_batch,), device="cuda").unique()
                acc = (model(sample(seeds)).argmax(-1) == labels[seeds]).float().mean().item()
            model.train()
            print(f"eval after {step}: acc {acc:.3f}", flush=True)
except torch.OutOfMemoryError:
    torch.cuda.memory._dump_snapshot("oom_snapshot.pickle")
    raise
