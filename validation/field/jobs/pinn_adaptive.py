"""A physics-informed network (Raissi et al.) for the 2D Burgers equations as PINN tutorials write it: an MLP
with tanh from (x, y, t) to (u, v), the PDE residual from first and second derivatives by autograd.grad with
create_graph, so the loss's backward runs through the derivative graph; residual-based adaptive refinement
(Lu et al., DeepXDE's RAR) adds the collocation points of largest residual every --refine-every steps, so the
batch of a step grows through the run; Adam. History from the start; the snapshot is dumped in the except handler.
"""
import argparse
import torch, torch.nn as nn

p = argparse.ArgumentParser()
p.add_argument("--width", type=int, default=256)
p.add_argument("--depth", type=int, default=7)
p.add_argument("--points", type=int, default=20000)
p.add_argument("--add", type=int, default=8000)
p.add_argument("--candidates", type=int, default=40000)
p.add_argument("--refine-every", type=int, default=3)
p.add_argument("--steps", type=int, default=16)
p.add_argument("--max-entries", type=int, default=150000)
args = p.parse_args()


class MLP(nn.Module):
    def __init__(self, width, depth):
        super().__init__()
        layers, d = [], 3
        for _ in range(depth):
            layers += [nn.Linear(d, width), nn.Tanh()]
            d = width
        self.net = nn.Sequential(*layers, nn.Linear(d, 2))

    def forward(self, xyt):
        return self.net(xyt)


def residual(model, pts, nu=0.01 / torch.pi):
    pts = pts.clone().requires_grad_(True)
    uv = model(pts)
    u, v = uv[:, 0:1], uv[:, 1:2]
    du = torch.autograd.grad(u, pts, torch.ones_like(u), create_graph=True)[0]
    dv = torch.autograd.grad(v, pts, torch.ones_like(v), create_graph=True)[0]
    uxx = torch.autograd.grad(du[:, 0:1], pts, torch.ones_like(u), create_graph=True)[0][:, 0:1]
    uyy = torch.autograd.grad(du[:, 1:2], pts, torch.ones_like(u), create_graph=True)[0][:, 1:2]
    vxx = torch.autograd.grad(dv[:, 0:1], pts, torch.ones_like(v), create_graph=True)[0][:, 0:1]
    vyy = torch.autograd.grad(dv[:, 1:2], pts, torch.ones_like(v), create_graph=True)[0][:, 1:2]
    ru = du[:, 2:3] + u * du[:, 0:1] + v * du[:, 1:2] - nu * (uxx + uyy)
    rv = dv[:, 2:3] + u * dv[:, 0:1] + v * dv[:, 1:2] - nu * (vxx + vyy)
    return ru, rv


torch.cuda.memory._record_memory_history(max_entries=args.max_entries)
torch.manual_seed(0)
model = MLP(args.width, args.depth).cuda()
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
colloc = torch.rand(args.points, 3, device="cuda") * 2 - 1
boundary = torch.rand(4096, 3, device="cuda") * 2 - 1
boundary[:, 2] = -1.0
target = torch.stack([-torch.sin(torch.pi * boundary[:, 0]), torch.sin(torch.pi * boundary[:, 1])], 1)
try:
    for step in range(args.steps):
        ru, rv = residual(model, colloc)
        loss = (ru.pow(2) + rv.pow(2)).mean() + (model(boundary) - target).pow(2).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if (step + 1) % args.refine_every == 0:
            cand = torch.rand(args.candidates, 3, device="cuda") * 2 - 1
            cu, cv = residual(model, cand)
            score = (cu.pow(2) + cv.pow(2)).detach().squeeze(1)
            colloc = torch.cat([colloc, cand[score.topk(args.add).indices]])
            del cu, cv, score, cand
        print(f"step {step}: loss {loss.item():.4f} points {colloc.shape[0]}", flush=True)
except torch.OutOfMemoryError:
    torch.cuda.memory._dump_snapshot("oom_snapshot.pickle")
    raise
