"""Object-detection training as torchvision's detection reference (references/detection/train.py) does it,
on random images and boxes (random init: no download).

Faster R-CNN with a ResNet-50 FPN (or --arch: RetinaNet, Mask R-CNN with a mask per box, Keypoint R-CNN with 17
keypoints per box), images of random sizes (GeneralizedRCNNTransform resizes them to 800 px on the short side, 1333
at most, and pads the batch to a multiple of 32), a random number of boxes per image, SGD with momentum, fp16
autocast with GradScaler (--amp), `optimizer.zero_grad()` before backward as the reference does. History from the
start; the snapshot is dumped in an `except` handler around the training loop.
"""
import argparse, random
import torch, torchvision

p = argparse.ArgumentParser()
p.add_argument("--arch", default="fasterrcnn_resnet50_fpn")
p.add_argument("--batch", type=int, default=8)
p.add_argument("--steps", type=int, default=12)
p.add_argument("--max-boxes", type=int, default=40)
p.add_argument("--no-amp", action="store_true")
p.add_argument("--max-entries", type=int, default=100000)
args = p.parse_args()

torch.cuda.memory._record_memory_history(max_entries=args.max_entries)
classes = 2 if "keypoint" in args.arch else 91
model = getattr(torchvision.models.detection, args.arch)(weights=None, weights_backbone=None, num_classes=classes)
model.cuda().train()
params = [q for q in model.parameters() if q.requires_grad]
optimizer = torch.optim.SGD(params, lr=0.02, momentum=0.9, weight_decay=1e-4)
scaler = None if args.no_amp else torch.amp.GradScaler("cuda")
rng = random.Random(0)


def sample():
    h, w = rng.randint(480, 1024), rng.randint(480, 1024)
    n = rng.randint(1, args.max_boxes)
    x1 = torch.rand(n) * (w - 32)
    y1 = torch.rand(n) * (h - 32)
    bw = 16 + torch.rand(n) * (w - x1 - 16)
    bh = 16 + torch.rand(n) * (h - y1 - 16)
    boxes = torch.stack([x1, y1, x1 + bw, y1 + bh], dim=1).cuda()
    labels = torch.randint(1, 91, (n,), device="cuda")
    target = {"boxes": boxes, "labels": labels}
    if "mask" in args.arch:  # the reference's COCO masks: one binary mask per box, the size of its image
        masks = torch.zeros(n, h, w, dtype=torch.uint8, device="cuda")
        for i, (a, b, c, d) in enumerate(boxes.int().tolist()):
            masks[i, b:d, a:c] = 1
        target["masks"] = masks
    if "keypoint" in args.arch:  # COCO person keypoints: 17 per box, (x, y, visibility) inside the box
        kx = boxes[:, None, 0] + torch.rand(n, 17, device="cuda") * (boxes[:, None, 2] - boxes[:, None, 0])
        ky = boxes[:, None, 1] + torch.rand(n, 17, device="cuda") * (boxes[:, None, 3] - boxes[:, None, 1])
        target["keypoints"] = torch.stack([kx, ky, torch.randint(0, 3, (n, 17), device="cuda").float()], dim=2)
        target["labels"] = torch.ones_like(labels)
    return torch.rand(3, h, w, device="cuda"), target


def train():
    for step in range(args.steps):
        images, targets = zip(*(sample() for _ in range(args.batch)))
        with torch.autocast("cuda", dtype=torch.float16, enabled=scaler is not None):
            loss_dict = model(list(images), list(targets))
            losses = sum(loss for loss in loss_dict.values())
        optimizer.zero_grad()
        if scaler is not None:
            scaler.scale(losses).backward()
            scaler.step(optimizer)
            scaler.update()
        else:
            losses.backward()
            optimizer.step()
        print(f"step {step} loss {losses.item():.3f}", flush=True)


try:
    train()
except torch.OutOfMemoryError:
    torch.cuda.memory._dump_snapshot("oom_snapshot.pickle")
    raise
