"""Semantic segmentation with deformable convolutions (DCNv2 via torchvision.ops.deform_conv2d, offsets and masks
predicted by a plain conv, as mmcv-style heads do) on a small ResNet-style encoder, trained with multi-scale
augmentation: each batch is resized to a side drawn from --sizes, as detectron2's ResizeShortestEdge does; pixel-wise
cross-entropy over 19 classes at full resolution (fp32 logits), SGD with momentum, bf16 autocast. Random images.
History from step --history-from; the snapshot is dumped by the OOM observer.
"""
import argparse
import torch, torch.nn as nn, torch.nn.functional as F
from torchvision.ops import deform_conv2d

p = argparse.ArgumentParser()
p.add_argument("--batch", type=int, default=8)
p.add_argument("--width", type=int, default=128)
p.add_argument("--sizes", default="512,640,768,896,1024")
p.add_argument("--steps", type=int, default=16)
p.add_argument("--history-from", type=int, default=3)
p.add_argument("--max-entries", type=int, default=60000)
args = p.parse_args()

torch._C._cuda_attach_out_of_memory_observer(
    lambda device, alloc, device_alloc, device_free: torch.cuda.memory._dump_snapshot("oom_snapshot.pickle"))


class DeformBlock(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.offset = nn.Conv2d(c, 27, 3, padding=1)
        self.weight = nn.Parameter(torch.randn(c, c, 3, 3) * (2.0 / (9 * c)) ** 0.5)
        self.norm = nn.BatchNorm2d(c)

    def forward(self, x):
        o = self.offset(x)
        offset, mask = o[:, :18], o[:, 18:].sigmoid()
        y = deform_conv2d(x, offset.to(x.dtype), self.weight.to(x.dtype), padding=1, mask=mask.to(x.dtype))
        return F.relu(self.norm(y) + x)


def stage(cin, cout, stride, blocks):
    layers = [nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(inplace=True)]
    return nn.Sequential(*layers, *[DeformBlock(cout) for _ in range(blocks)])


class Net(nn.Module):
    def __init__(self, w):
        super().__init__()
        self.s1, self.s2 = stage(3, w, 2, 1), stage(w, 2 * w, 2, 2)
        self.s3, self.s4 = stage(2 * w, 4 * w, 2, 3), stage(4 * w, 4 * w, 1, 2)
        self.head = nn.Conv2d(4 * w, 19, 1)

    def forward(self, x):
        logits = self.head(self.s4(self.s3(self.s2(self.s1(x)))))
        return F.interpolate(logits, size=x.shape[-2:], mode="bilinear", align_corners=False)


torch.manual_seed(0)
model = Net(args.width).cuda().to(memory_format=torch.channels_last)
opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=1e-4)
sizes = [int(s) for s in args.sizes.split(",")]
gen = torch.Generator().manual_seed(2)
for step in range(args.steps):
    if step == args.history_from:
        torch.cuda.memory._record_memory_history(max_entries=args.max_entries)
    side = sizes[int(torch.randint(len(sizes), (1,), generator=gen))]
    x = torch.randn(args.batch, 3, side, side, generator=gen).cuda().to(memory_format=torch.channels_last)
    y = torch.randint(19, (args.batch, side, side), generator=gen).cuda()
    with torch.autocast("cuda", dtype=torch.bfloat16):
        out = model(x)
    loss = F.cross_entropy(out.float(), y)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    print(f"step {step}: side {side} loss {loss.item():.3f}", flush=True)
