"""Full-batch node classification with a graph attention network in plain torch, as the GAT paper trains it on a
whole graph per step, without PyG: a random graph (--nodes, --edges, self-loops added), node features on the GPU, two
GAT layers (per head a linear projection, attention logits from source and destination terms, LeakyReLU, a softmax
over each node's incoming edges by scatter_reduce "amax" and index_add_, messages summed by index_add_), ELU,
dropout on features and attention, Adam with weight decay. Every step is the same whole graph; every --eval-every
steps an evaluation under torch.no_grad. History from the start; the snapshot is dumped in the except handler.
"""
import argparse
import torch, torch.nn as nn, torch.nn.functional as F

p = argparse.ArgumentParser()
p.add_argument("--nodes", type=int, default=400_000)
p.add_argument("--edges", type=int, default=6_000_000)
p.add_argument("--features", type=int, default=256)
p.add_argument("--heads", type=int, default=8)
p.add_argument("--hidden", type=int, default=32)
p.add_argument("--classes", type=int, default=40)
p.add_argument("--steps", type=int, default=12)
p.add_argument("--eval-every", type=int, default=5)
p.add_argument("--max-entries", type=int, default=100000)
args = p.parse_args()

torch.cuda.memory._record_memory_history(max_entries=args.max_entries)
torch.manual_seed(0)
loops = torch.arange(args.nodes, device="cuda")
src = torch.cat([torch.randint(0, args.nodes, (args.edges,), device="cuda"), loops])
dst = torch.cat([torch.randint(0, args.nodes, (args.edges,), device="cuda"), loops])
x = torch.randn(args.nodes, args.features, device="cuda")
y = torch.randint(0, args.classes, (args.nodes,), device="cuda")
train_mask = torch.rand(args.nodes, device="cuda") < 0.6


class GATLayer(nn.Module):
    def __init__(self, cin, heads, cout):
        super().__init__()
        self.heads, self.cout = heads, cout
        self.lin = nn.Linear(cin, heads * cout, bias=False)
        self.att_src = nn.Parameter(torch.randn(heads, cout) * 0.1)
        self.att_dst = nn.Parameter(torch.randn(heads, cout) * 0.1)

    def forward(self, h):
        h = self.lin(h).view(-1, self.heads, self.cout)
        logits = F.leaky_relu((h * self.att_src).sum(-1)[src] + (h * self.att_dst).sum(-1)[dst], 0.2)
        top = torch.full((h.shape[0], self.heads), float("-inf"), device=h.device)
        top = top.scatter_reduce(0, dst[:, None].expand(-1, self.heads), logits, "amax", include_self=True)
        weights = (logits - top[dst]).exp()
        norm = torch.zeros(h.shape[0], self.heads, device=h.device).index_add_(0, dst, weights)
        alpha = F.dropout(weights / norm[dst].clamp(min=1e-16), 0.6, self.training)
        return torch.zeros_like(h).index_add_(0, dst, h[src] * alpha[..., None])


class GAT(nn.Module):
    def __init__(self):
        super().__init__()
        self.layer1 = GATLayer(args.features, args.heads, args.hidden)
        self.layer2 = GATLayer(args.heads * args.hidden, 1, args.classes)

    def forward(self, h):
        h = F.dropout(h, 0.6, self.training)
        h = F.elu(self.layer1(h).flatten(1))
        return self.layer2(F.dropout(h, 0.6, self.training)).squeeze(1)


model = GAT().cuda()
opt = torch.optim.Adam(model.parameters(), lr=5e-3, weight_decay=5e-4)
try:
    for step in range(args.steps):
        loss = F.cross_entropy(model(x)[train_mask], y[train_mask])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        print(f"step {step}: loss {loss.item():.3f}", flush=True)
        if (step + 1) % args.eval_every == 0:
            model.eval()
            with torch.no_grad():
                acc = (model(x)[~train_mask].argmax(-1) == y[~train_mask]).float().mean().item()
            model.train()
            print(f"eval after {step}: acc {acc:.3f}", flush=True)
except torch.OutOfMemoryError:
    torch.cuda.memory._dump_snapshot("oom_snapshot.pickle")
    raise
