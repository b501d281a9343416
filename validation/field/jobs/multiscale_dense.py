"""YOLO-style multi-scale training (ultralytics' --multi-scale, YOLOv3's "random=1"): each batch is resized to a
random side between 0.5× and 1.5× the nominal image size, in multiples of the stride 32, before the forward pass,
`imgs = F.interpolate(imgs, size=ns, mode="bilinear", align_corners=False)`. A torchvision ResNet-50 backbone with
an FPN-less dense head predicting (objectness, box, classes) per 32-px cell, fp16 autocast with GradScaler, SGD,
the mosaic loader replaced by random images (seeded; the random sizes seeded as the repo's `random` is).
With --benchmark, cudnn.benchmark as YOLOv5's init_seeds() sets it (every new size is benchmarked). History from
the start; the snapshot is dumped in the except handler.
"""
import argparse, math, random
import torch, torch.nn as nn, torch.nn.functional as F, torchvision

p = argparse.ArgumentParser()
p.add_argument("--batch", type=int, default=16)
p.add_argument("--imgsz", type=int, default=640)
p.add_argument("--classes", type=int, default=80)
p.add_argument("--steps", type=int, default=12)
p.add_argument("--max-entries", type=int, default=200000)
p.add_argument("--benchmark", action="store_true")
args = p.parse_args()
torch.backends.cudnn.benchmark = args.benchmark

random.seed(0)
torch.manual_seed(0)
device = torch.device("cuda")
gs = 32


class DenseDetector(nn.Module):
    def __init__(self):
        super().__init__()
        r = torchvision.models.resnet50()
        self.backbone = nn.Sequential(*list(r.children())[:-2])
        self.head = nn.Sequential(nn.Conv2d(2048, 512, 3, padding=1), nn.SiLU(), nn.Conv2d(512, 5 + args.classes, 1))

    def forward(self, x):
        return self.head(self.backbone(x))


model = DenseDetector().to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.937, nesterov=True)
scaler = torch.amp.GradScaler("cuda")
gen = torch.Generator().manual_seed(1)

torch.cuda.memory._record_memory_history(max_entries=args.max_entries)
try:
    for i in range(args.steps):
        imgs = torch.rand(args.batch, 3, args.imgsz, args.imgsz, generator=gen).to(device, non_blocking=True)
        sz = random.randrange(int(args.imgsz * 0.5), int(args.imgsz * 1.5) + gs) // gs * gs
        sf = sz / max(imgs.shape[2:])
        if sf != 1:
            ns = [math.ceil(x * sf / gs) * gs for x in imgs.shape[2:]]
            imgs = F.interpolate(imgs, size=ns, mode="bilinear", align_corners=False)
        with torch.autocast("cuda", dtype=torch.float16):
            pred = model(imgs)
            target = torch.rand(pred.shape, device=device)
            loss = F.binary_cross_entropy_with_logits(pred[:, :1].float(), target[:, :1].float()) + \
                F.mse_loss(pred[:, 1:5].float(), target[:, 1:5].float()) + \
                F.binary_cross_entropy_with_logits(pred[:, 5:].float(), (target[:, 5:] > 0.98).float())
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad()
        print(f"{i}/{args.steps - 1} img {imgs.shape[-1]} loss {loss.item():.4f}", flush=True)
except torch.OutOfMemoryError:
    torch.cuda.memory._dump_snapshot("oom_snapshot.pickle")
    raise
