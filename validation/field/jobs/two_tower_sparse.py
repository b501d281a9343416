"""A two-tower retrieval model as recommender tutorials train it: sparse embedding tables (SparseAdam) under dense
MLP towers (Adam), an in-batch softmax over the batch's items plus sampled negatives.

The user tower mean-pools an EmbeddingBag over each user's watch history (histories of random length, so every
batch's bag holds a different number of ids) with the user's own id; the item tower embeds the item id and its
category. Sparse gradients: each step allocates index and value tensors sized by the ids the batch touched, and
SparseAdam's updates. Logits are batch x (batch + negatives), fp32. History from step 2 (after the warm-up); the
snapshot is dumped by the OOM observer.
"""
import argparse, random
import torch, torch.nn as nn, torch.nn.functional as F

p = argparse.ArgumentParser()
p.add_argument("--items", type=int, default=2_000_000)
p.add_argument("--users", type=int, default=1_000_000)
p.add_argument("--dim", type=int, default=256)
p.add_argument("--batch", type=int, default=8192)
p.add_argument("--negatives", type=int, default=16384)
p.add_argument("--steps", type=int, default=14)
p.add_argument("--max-entries", type=int, default=100000)
args = p.parse_args()

torch._C._cuda_attach_out_of_memory_observer(
    lambda device, alloc, device_alloc, device_free: torch.cuda.memory._dump_snapshot("oom_snapshot.pickle"))


def tower(d):
    return nn.Sequential(nn.Linear(d, 1024), nn.ReLU(), nn.Linear(1024, 512), nn.ReLU(), nn.Linear(512, 256))


class TwoTower(nn.Module):
    def __init__(self):
        super().__init__()
        self.history = nn.EmbeddingBag(args.items, args.dim, mode="mean", sparse=True)
        self.user = nn.Embedding(args.users, args.dim, sparse=True)
        self.item = nn.Embedding(args.items, args.dim, sparse=True)
        self.category = nn.Embedding(1000, 64)
        self.user_tower, self.item_tower = tower(2 * args.dim), tower(args.dim + 64)

    def users(self, uid, hist, offsets):
        return F.normalize(self.user_tower(torch.cat([self.user(uid), self.history(hist, offsets)], 1)), dim=1)

    def items(self, iid, cat):
        return F.normalize(self.item_tower(torch.cat([self.item(iid), self.category(cat)], 1)), dim=1)


model = TwoTower().cuda()
sparse = [model.history.weight, model.user.weight, model.item.weight]
dense = [q for q in model.parameters() if all(q is not s for s in sparse)]
opt_sparse = torch.optim.SparseAdam(sparse, lr=1e-3)
opt_dense = torch.optim.Adam(dense, lr=1e-3)
rng = random.Random(3)


def batch():
    lengths = [max(1, min(400, int(rng.lognormvariate(3.5, 1.0)))) for _ in range(args.batch)]
    hist = torch.randint(0, args.items, (sum(lengths),), device="cuda")
    offsets = torch.tensor([0] + lengths[:-1], device="cuda").cumsum(0)
    uid = torch.randint(0, args.users, (args.batch,), device="cuda")
    iid = torch.randint(0, args.items, (args.batch + args.negatives,), device="cuda")
    cat = torch.randint(0, 1000, (args.batch + args.negatives,), device="cuda")
    return uid, hist, offsets, iid, cat, sum(lengths)


for step in range(args.steps):
    if step == 2:
        torch.cuda.memory._record_memory_history(max_entries=args.max_entries)
    uid, hist, offsets, iid, cat, watched = batch()
    logits = model.users(uid, hist, offsets) @ model.items(iid, cat).T / 0.05
    loss = F.cross_entropy(logits, torch.arange(args.batch, device="cuda"))
    opt_sparse.zero_grad()
    opt_dense.zero_grad()
    loss.backward()
    opt_sparse.step()
    opt_dense.step()
    print(f"step {step} history ids {watched} loss {loss.item():.3f}", flush=True)
