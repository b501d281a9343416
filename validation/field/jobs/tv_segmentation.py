"""Semantic segmentation as torchvision's references/segmentation recipe trains it, on random images:
deeplabv3_resnet50 with the auxiliary classifier (loss out + 0.5 aux, ignore_index 255), SGD with momentum,
AMP with GradScaler, a poly learning rate, multi-scale batches of varying height and width, and an eval pass
every --eval-every steps at a larger size under inference_mode. History from the start; the snapshot is
dumped in the except handler.
"""
import argparse, random
import torch, torch.nn.functional as F, torchvision

p = argparse.ArgumentParser()
p.add_argument("--model", default="deeplabv3_resnet50")
p.add_argument("--batch", type=int, default=8)
p.add_argument("--eval-batch", type=int, default=8)
p.add_argument("--steps", type=int, default=12)
p.add_argument("--eval-every", type=int, default=4)
p.add_argument("--sizes", default="384,448,512,576,640")
p.add_argument("--eval-size", default="768,1024")
p.add_argument("--max-entries", type=int, default=100000)
args = p.parse_args()

torch.cuda.memory._record_memory_history(max_entries=args.max_entries)
model = getattr(torchvision.models.segmentation, args.model)(weights=None, weights_backbone=None, num_classes=21,
                                                            aux_loss=True).cuda()
params = [{"params": [q for q in model.backbone.parameters() if q.requires_grad]},
          {"params": [q for q in model.classifier.parameters() if q.requires_grad]},
          {"params": [q for q in model.aux_classifier.parameters() if q.requires_grad], "lr": 0.2}]
opt = torch.optim.SGD(params, lr=0.02, momentum=0.9, weight_decay=1e-4)
sched = torch.optim.lr_scheduler.PolynomialLR(opt, total_iters=args.steps, power=0.9)
scaler = torch.amp.GradScaler("cuda")
sizes = [int(s) for s in args.sizes.split(",")]
eh, ew = (int(s) for s in args.eval_size.split(","))
rng = random.Random(1)


def criterion(out, target):
    return F.cross_entropy(out["out"], target, ignore_index=255) + 0.5 * F.cross_entropy(out["aux"], target,
                                                                                         ignore_index=255)


def evaluate():
    model.eval()
    with torch.inference_mode(), torch.autocast("cuda", dtype=torch.float16):
        for _ in range(2):
            x = torch.randn(args.eval_batch, 3, eh, ew, device="cuda")
            pred = model(x)["out"].argmax(1)
    model.train()
    return pred.float().mean().item()


try:
    model.train()
    for step in range(args.steps):
        h, w = rng.choice(sizes), rng.choice(sizes)
        x = torch.randn(args.batch, 3, h, w, device="cuda")
        y = torch.randint(0, 21, (args.batch, h, w), device="cuda")
        with torch.autocast("cuda", dtype=torch.float16):
            loss = criterion(model(x), y)
        opt.zero_grad()
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        sched.step()
        print(f"step {step} size {h}x{w} loss {loss.item():.3f}", flush=True)
        if (step + 1) % args.eval_every == 0:
            print(f"eval {evaluate():.3f}", flush=True)
except torch.OutOfMemoryError:
    torch.cuda.memory._dump_snapshot("oom_snapshot.pickle")
    raise
