"""PGD adversarial training (Madry et al. 2018) of a torchvision ResNet-50, as robustness codebases write it: for
each batch, --attack-steps iterations of projected gradient ascent on an L-inf perturbation (the model in eval mode,
the input's gradient by torch.autograd.grad, a sign step, a clamp to the epsilon ball and to [0, 1]), then one
training step on the perturbed batch (train mode, SGD with momentum and weight decay). bf16 autocast, channels_last,
cudnn.benchmark. Random images; an eval of clean accuracy every --eval-every steps under torch.no_grad. History from
the start; the snapshot is dumped by the OOM observer.
"""
import argparse
import torch, torch.nn.functional as F, torchvision

p = argparse.ArgumentParser()
p.add_argument("--batch", type=int, default=192)
p.add_argument("--image", type=int, default=224)
p.add_argument("--attack-steps", type=int, default=5)
p.add_argument("--epsilon", type=float, default=8 / 255)
p.add_argument("--steps", type=int, default=10)
p.add_argument("--eval-every", type=int, default=4)
p.add_argument("--max-entries", type=int, default=100000)
args = p.parse_args()

torch._C._cuda_attach_out_of_memory_observer(
    lambda device, alloc, device_alloc, device_free: torch.cuda.memory._dump_snapshot("oom_snapshot.pickle"))
torch.cuda.memory._record_memory_history(max_entries=args.max_entries)
torch.backends.cudnn.benchmark = True
torch.manual_seed(0)
model = torchvision.models.resnet50(num_classes=100).cuda().to(memory_format=torch.channels_last)
opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-4)
alpha = 2.5 * args.epsilon / args.attack_steps


def batch(n):
    x = torch.rand(n, 3, args.image, args.image, device="cuda").contiguous(memory_format=torch.channels_last)
    return x, torch.randint(0, 100, (n,), device="cuda")


def attack(x, y):
    model.eval()
    delta = torch.empty_like(x).uniform_(-args.epsilon, args.epsilon).requires_grad_(True)
    for _ in range(args.attack_steps):
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = F.cross_entropy(model((x + delta).clamp(0, 1)), y)
        grad, = torch.autograd.grad(loss, delta)
        delta = (delta + alpha * grad.sign()).clamp(-args.epsilon, args.epsilon).detach().requires_grad_(True)
    model.train()
    return (x + delta.detach()).clamp(0, 1)


for step in range(args.steps):
    x, y = batch(args.batch)
    x_adv = attack(x, y)
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = F.cross_entropy(model(x_adv), y)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    print(f"step {step}: robust loss {loss.item():.3f}", flush=True)
    if (step + 1) % args.eval_every == 0:
        model.eval()
        with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
            x, y = batch(2 * args.batch)
            acc = (model(x).argmax(-1) == y).float().mean().item()
        model.train()
        print(f"eval after {step}: clean acc {acc:.3f}", flush=True)
