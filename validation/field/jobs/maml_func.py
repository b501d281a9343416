"""MAML (Finn et al. 2017) few-shot classification, second order, as the torch.func ports train it (PyTorch's
functorch MAML-Omniglot example and the ports of it to mini-ImageNet): the 4-block conv net (Conv2d 3x3 at --width,
BatchNorm2d in train mode without running stats, ReLU, MaxPool2d) on --size px images, a linear head to --ways
classes. Each meta-iteration draws --tasks N-way K-shot tasks; per task, --inner-steps SGD steps on the support set
run functionally, torch.func.functional_call with the adapted parameters, their gradients from
torch.autograd.grad(create_graph=True), so every inner step's forward and backward stay alive until the tasks' query
losses, summed, are backpropagated once into the meta-parameters (Adam). fp32. Random images and labels per task
(seeded, made on the CPU and moved to the GPU as a loader's batch is). History from the training loop's start; the
snapshot is dumped in the except handler.
"""
import argparse
import torch, torch.nn as nn, torch.nn.functional as F
from torch.func import functional_call

p = argparse.ArgumentParser()
p.add_argument("--ways", type=int, default=5)
p.add_argument("--shots", type=int, default=5)
p.add_argument("--query", type=int, default=15)
p.add_argument("--tasks", type=int, default=4)
p.add_argument("--inner-steps", type=int, default=5)
p.add_argument("--inner-lr", type=float, default=0.01)
p.add_argument("--meta-lr", type=float, default=1e-3)
p.add_argument("--size", type=int, default=84)
p.add_argument("--width", type=int, default=64)
p.add_argument("--iters", type=int, default=6)
p.add_argument("--max-entries", type=int, default=200000)
args = p.parse_args()

torch.manual_seed(0)
device = torch.device("cuda")


def conv_block(in_ch, out_ch):
    return nn.Sequential(nn.Conv2d(in_ch, out_ch, 3, padding=1),
                         nn.BatchNorm2d(out_ch, affine=True, track_running_stats=False),
                         nn.ReLU(), nn.MaxPool2d(2))


w = args.width
net = nn.Sequential(conv_block(3, w), conv_block(w, w), conv_block(w, w), conv_block(w, w), nn.Flatten(),
                    nn.Linear(w * (args.size // 16) ** 2, args.ways)).to(device)
meta_opt = torch.optim.Adam(net.parameters(), lr=args.meta_lr)
params = dict(net.named_parameters())
buffers = dict(net.named_buffers())  # empty: BatchNorm keeps no running stats
gen = torch.Generator().manual_seed(1)


def sample_tasks():
    """One meta-batch as an episodic loader yields it: [tasks, ways * shots (or query), 3, size, size] and labels."""
    n_spt, n_qry = args.ways * args.shots, args.ways * args.query
    x_spt = torch.randn(args.tasks, n_spt, 3, args.size, args.size, generator=gen)
    y_spt = torch.randint(args.ways, (args.tasks, n_spt), generator=gen)
    x_qry = torch.randn(args.tasks, n_qry, 3, args.size, args.size, generator=gen)
    y_qry = torch.randint(args.ways, (args.tasks, n_qry), generator=gen)
    return [t.to(device) for t in (x_spt, y_spt, x_qry, y_qry)]


def loss_for_task(x_spt, y_spt, x_qry, y_qry):
    new_params = params
    for _ in range(args.inner_steps):
        spt_loss = F.cross_entropy(functional_call(net, (new_params, buffers), (x_spt,)), y_spt)
        grads = torch.autograd.grad(spt_loss, new_params.values(), create_graph=True)
        new_params = {k: p - args.inner_lr * g for (k, p), g in zip(new_params.items(), grads)}
    qry_logits = functional_call(net, (new_params, buffers), (x_qry,))
    return F.cross_entropy(qry_logits, y_qry), (qry_logits.argmax(dim=1) == y_qry).float().mean()


torch.cuda.memory._record_memory_history(max_entries=args.max_entries)
try:
    for it in range(args.iters):
        x_spt, y_spt, x_qry, y_qry = sample_tasks()
        meta_opt.zero_grad()
        qry_losses, qry_accs = [], []
        for i in range(args.tasks):
            qry_loss, qry_acc = loss_for_task(x_spt[i], y_spt[i], x_qry[i], y_qry[i])
            qry_losses.append(qry_loss)
            qry_accs.append(qry_acc)
        meta_loss = torch.stack(qry_losses).sum()
        meta_loss.backward()
        meta_opt.step()
        print(f"[iter {it + 1}/{args.iters}] meta-loss {meta_loss.item() / args.tasks:.4f} "
              f"acc {torch.stack(qry_accs).mean().item():.4f}", flush=True)
except torch.OutOfMemoryError:
    torch.cuda.memory._dump_snapshot("oom_snapshot.pickle")
    raise
