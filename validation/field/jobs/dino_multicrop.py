"""DINO self-distillation as facebookresearch/dino's main_dino.py trains a ResNet-50, in a plain loop: multi-crop
(2 global crops at --global-size and --local-crops local ones at --local-size, cut and resized on the GPU), a
MultiCropWrapper that runs the backbone once per crop resolution, a projection head to --out-dim prototypes
(the last layer without weight normalisation here), a teacher that is the student's EMA (no gradients) on the
global crops only, the DINO loss with centering and sharpening, cudnn.benchmark, fp16 autocast with GradScaler,
AdamW. Fixed shapes. History from the start (ring of --max-entries); the snapshot is dumped in the except handler.
"""
import argparse, copy, math, random
import torch, torch.nn as nn, torch.nn.functional as F, torchvision

p = argparse.ArgumentParser()
p.add_argument("--arch", default="resnet50")
p.add_argument("--batch", type=int, default=64)
p.add_argument("--global-size", type=int, default=224)
p.add_argument("--local-size", type=int, default=96)
p.add_argument("--local-crops", type=int, default=6)
p.add_argument("--out-dim", type=int, default=65536)
p.add_argument("--steps", type=int, default=10)
p.add_argument("--max-entries", type=int, default=100000)
args = p.parse_args()

torch.backends.cudnn.benchmark = True
torch.cuda.memory._record_memory_history(max_entries=args.max_entries)


class DINOHead(nn.Module):
    def __init__(self, in_dim, out_dim, hidden=2048, bottleneck=256):
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(in_dim, hidden), nn.GELU(), nn.Linear(hidden, hidden), nn.GELU(),
                                 nn.Linear(hidden, bottleneck))
        self.last_layer = nn.Linear(bottleneck, out_dim, bias=False)

    def forward(self, x):
        return self.last_layer(F.normalize(self.mlp(x), dim=-1))


class MultiCropWrapper(nn.Module):
    def __init__(self, backbone, head):
        super().__init__()
        self.backbone, self.head = backbone, head

    def forward(self, crops):
        sizes = torch.tensor([c.shape[-1] for c in crops])
        ends = torch.cumsum(torch.unique_consecutive(sizes, return_counts=True)[1], 0).tolist()
        start, features = 0, []
        for end in ends:
            features.append(self.backbone(torch.cat(crops[start:end])))
            start = end
        return self.head(torch.cat(features))


backbone = getattr(torchvision.models, args.arch)()
width = backbone.fc.in_features
backbone.fc = nn.Identity()
student = MultiCropWrapper(backbone, DINOHead(width, args.out_dim)).cuda()
teacher = copy.deepcopy(student)
for param in teacher.parameters():
    param.requires_grad_(False)
center = torch.zeros(1, args.out_dim, device="cuda")
optimizer = torch.optim.AdamW(student.parameters(), lr=5e-4, weight_decay=0.04)
scaler = torch.amp.GradScaler("cuda")
rng = random.Random(0)


def random_crop(images, size, low, high):
    s = images.shape[-1]
    side = max(8, int(s * math.sqrt(rng.uniform(low, high))))
    i, j = rng.randint(0, s - side), rng.randint(0, s - side)
    return F.interpolate(images[:, :, i:i + side, j:j + side], size=(size, size), mode="bilinear",
                         align_corners=False)


def dino_loss(student_out, teacher_out):
    global center
    student_views = (student_out / 0.1).chunk(2 + args.local_crops)
    teacher_views = F.softmax((teacher_out - center) / 0.04, dim=-1).detach().chunk(2)
    total, terms = 0, 0
    for iq, q in enumerate(teacher_views):
        for v, out in enumerate(student_views):
            if v == iq:
                continue
            total = total + torch.sum(-q * F.log_softmax(out, dim=-1), dim=-1).mean()
            terms += 1
    with torch.no_grad():
        center = center * 0.9 + teacher_out.mean(dim=0, keepdim=True) * 0.1
    return total / terms


try:
    for step in range(args.steps):
        images = torch.rand(args.batch, 3, 256, 256, device="cuda")
        crops = [random_crop(images, args.global_size, 0.4, 1.0) for _ in range(2)]
        crops += [random_crop(images, args.local_size, 0.05, 0.4) for _ in range(args.local_crops)]
        with torch.autocast("cuda", dtype=torch.float16):
            teacher_out = teacher(crops[:2])
            student_out = student(crops)
            loss = dino_loss(student_out.float(), teacher_out.float())
        optimizer.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        with torch.no_grad():
            for param_q, param_k in zip(student.parameters(), teacher.parameters()):
                param_k.data.mul_(0.996).add_((1 - 0.996) * param_q.detach().data)
        print(f"step {step} loss {loss.item():.3f}", flush=True)
except torch.OutOfMemoryError:
    torch.cuda.memory._dump_snapshot("oom_snapshot.pickle")
    raise
