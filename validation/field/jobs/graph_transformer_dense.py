"""A Graphormer-style graph transformer for molecular property regression, written as its papers' reference loops:
graphs of changing node counts padded to the batch's largest, attention biased per head by embeddings of the
shortest-path distance (an N x N x heads bias per graph) and node degrees as centrality encodings; fp32 with TF32,
AdamW, an evaluation over a held-out set every --eval-every steps with a larger batch under no_grad. Random graphs
(Erdos-Renyi), distances by batched Floyd-Warshall on the GPU. History from the start; the snapshot is dumped in
the except handler.
"""
import argparse
import torch, torch.nn as nn, torch.nn.functional as F

p = argparse.ArgumentParser()
p.add_argument("--layers", type=int, default=12)
p.add_argument("--dim", type=int, default=512)
p.add_argument("--heads", type=int, default=16)
p.add_argument("--batch", type=int, default=32)
p.add_argument("--eval-batch", type=int, default=96)
p.add_argument("--min-nodes", type=int, default=96)
p.add_argument("--max-nodes", type=int, default=320)
p.add_argument("--steps", type=int, default=15)
p.add_argument("--eval-every", type=int, default=5)
p.add_argument("--max-entries", type=int, default=120000)
args = p.parse_args()
torch.backends.cuda.matmul.allow_tf32 = True
MAX_DIST = 16


def random_graphs(b, n, gen):
    counts = torch.randint(args.min_nodes, n + 1, (b,), generator=gen)
    width = int(counts.max())
    adj = (torch.rand(b, width, width, generator=gen) < 4.0 / width).float()
    adj = torch.triu(adj, 1)
    adj = adj + adj.transpose(1, 2)
    mask = torch.arange(width)[None] < counts[:, None]
    adj = adj * mask[:, :, None] * mask[:, None, :]
    return adj.cuda(), mask.cuda()


def shortest_paths(adj):
    b, n, _ = adj.shape
    d = torch.where(adj > 0, 1.0, float("inf"))
    d = d.masked_fill(torch.eye(n, dtype=torch.bool, device=adj.device), 0.0)
    for k in range(n):
        d = torch.minimum(d, d[:, :, k:k + 1] + d[:, k:k + 1, :])
    return d.clamp(max=MAX_DIST).nan_to_num(MAX_DIST, posinf=MAX_DIST).long()


class Layer(nn.Module):
    def __init__(self, d, h):
        super().__init__()
        self.h = h
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.o = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.ff = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x, bias):
        b, n, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, n, 3, self.h, d // self.h).permute(2, 0, 3, 1, 4)
        att = (q @ k.transpose(-1, -2)) / (d // self.h) ** 0.5 + bias
        x = x + self.o((att.softmax(-1) @ v).transpose(1, 2).reshape(b, n, d))
        return x + self.ff(self.ln2(x))


class Graphormer(nn.Module):
    def __init__(self):
        super().__init__()
        self.atom = nn.Embedding(64, args.dim)
        self.degree = nn.Embedding(64, args.dim)
        self.spd = nn.Embedding(MAX_DIST + 1, args.heads)
        self.layers = nn.ModuleList(Layer(args.dim, args.heads) for _ in range(args.layers))
        self.head = nn.Linear(args.dim, 1)

    def forward(self, atoms, adj, mask):
        x = self.atom(atoms) + self.degree(adj.sum(-1).long().clamp(max=63))
        bias = self.spd(shortest_paths(adj)).permute(0, 3, 1, 2)
        bias = bias.masked_fill(~mask[:, None, None, :], float("-inf"))
        for layer in self.layers:
            x = layer(x, bias)
        return self.head((x * mask[..., None]).sum(1) / mask.sum(1, keepdim=True))


torch.cuda.memory._record_memory_history(max_entries=args.max_entries)
torch.manual_seed(0)
model = Graphormer().cuda()
opt = torch.optim.AdamW(model.parameters(), lr=2e-4)
gen = torch.Generator().manual_seed(3)
try:
    for step in range(args.steps):
        adj, mask = random_graphs(args.batch, args.max_nodes, gen)
        atoms = torch.randint(64, mask.shape, generator=gen).cuda()
        y = torch.randn(args.batch, 1, generator=gen).cuda()
        loss = F.l1_loss(model(atoms, adj, mask), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        print(f"step {step}: nodes {mask.shape[1]} loss {loss.item():.3f}", flush=True)
        if (step + 1) % args.eval_every == 0:
            model.eval()
            with torch.no_grad():
                adj, mask = random_graphs(args.eval_batch, args.max_nodes, gen)
                atoms = torch.randint(64, mask.shape, generator=gen).cuda()
                mae = model(atoms, adj, mask).abs().mean().item()
            model.train()
            print(f"eval after {step}: {mae:.3f}", flush=True)
except torch.OutOfMemoryError:
    torch.cuda.memory._dump_snapshot("oom_snapshot.pickle")
    raise
