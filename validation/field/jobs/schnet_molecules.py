"""A SchNet-style interatomic potential (Schütt et al.) in plain torch, as small molecular-ML repositories write it
without PyG: molecules of random sizes padded to the largest in the batch, every pair's distance expanded in
--rbf Gaussians, continuous-filter convolutions (a filter network on the expansion, multiplied into the neighbours'
features and summed over the padded pair axis: batch x atoms x atoms x features), --interactions blocks, an energy
summed over atoms and forces as its negative gradient (torch.autograd.grad with create_graph=True), a loss on both,
AdamW. The batch's memory follows the largest molecule in it squared. History from the start; the snapshot is
dumped by the OOM observer.
"""
import argparse, random
import torch, torch.nn as nn, torch.nn.functional as F

p = argparse.ArgumentParser()
p.add_argument("--batch", type=int, default=32)
p.add_argument("--features", type=int, default=128)
p.add_argument("--rbf", type=int, default=50)
p.add_argument("--interactions", type=int, default=4)
p.add_argument("--min-atoms", type=int, default=20)
p.add_argument("--max-atoms", type=int, default=180)
p.add_argument("--steps", type=int, default=24)
p.add_argument("--max-entries", type=int, default=100000)
args = p.parse_args()

torch._C._cuda_attach_out_of_memory_observer(
    lambda device, alloc, device_alloc, device_free: torch.cuda.memory._dump_snapshot("oom_snapshot.pickle"))


class Interaction(nn.Module):
    def __init__(self):
        super().__init__()
        f = args.features
        self.filter = nn.Sequential(nn.Linear(args.rbf, f), nn.Softplus(), nn.Linear(f, f))
        self.in2f = nn.Linear(f, f, bias=False)
        self.out = nn.Sequential(nn.Linear(f, f), nn.Softplus(), nn.Linear(f, f))

    def forward(self, h, expansion, pair_mask):
        w = self.filter(expansion) * pair_mask.unsqueeze(-1)
        return h + self.out((w * self.in2f(h).unsqueeze(1)).sum(2))


class SchNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(10, args.features)
        self.register_buffer("centers", torch.linspace(0, 10, args.rbf))
        self.blocks = nn.ModuleList(Interaction() for _ in range(args.interactions))
        self.head = nn.Sequential(nn.Linear(args.features, 64), nn.Softplus(), nn.Linear(64, 1))

    def forward(self, z, pos, atom_mask):
        d = torch.cdist(pos, pos)
        expansion = torch.exp(-10.0 * (d.unsqueeze(-1) - self.centers) ** 2)
        pair_mask = (atom_mask.unsqueeze(1) & atom_mask.unsqueeze(2)).float()
        pair_mask = pair_mask * (1 - torch.eye(z.shape[1], device=z.device))
        h = self.embed(z)
        for block in self.blocks:
            h = block(h, expansion, pair_mask)
        return (self.head(h).squeeze(-1) * atom_mask).sum(1)


def molecules(rng):
    sizes = [rng.randint(args.min_atoms, args.max_atoms) for _ in range(args.batch)]
    n = max(sizes)
    z = torch.zeros(args.batch, n, dtype=torch.long)
    mask = torch.zeros(args.batch, n, dtype=torch.bool)
    for i, s in enumerate(sizes):
        z[i, :s] = torch.randint(1, 10, (s,))
        mask[i, :s] = True
    pos = torch.randn(args.batch, n, 3) * (n ** (1 / 3))
    return z.cuda(), pos.cuda().requires_grad_(), mask.cuda()


torch.cuda.memory._record_memory_history(max_entries=args.max_entries)
model = SchNet().cuda()
opt = torch.optim.AdamW(model.parameters(), lr=5e-4)
rng = random.Random(7)
for step in range(args.steps):
    z, pos, mask = molecules(rng)
    energy = model(z, pos, mask)
    forces = -torch.autograd.grad(energy.sum(), pos, create_graph=True)[0]
    loss = F.mse_loss(energy, torch.zeros_like(energy)) + 100 * F.mse_loss(forces, torch.zeros_like(forces))
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    if step % 6 == 0:
        print(f"step {step}: {z.shape[1]} atoms max, loss {loss.item():.3f}", flush=True)
