"""Multi-task learning with round-robin task sampling, as multi-task codebases (MTI-Net, LibMTL's "RR" sampler)
do it: one shared torchvision ResNet-50 trunk, a classification head trained on 224-px batches and a dense
segmentation head (an upsampling decoder, 21 classes) on --seg-size batches, the two tasks' loaders taking turns
step by step, each step its own forward, backward and AdamW update. bf16 autocast. Random data (seeded). History
from the start; the snapshot is dumped by the OOM observer.
"""
import argparse
import torch, torch.nn as nn, torch.nn.functional as F, torchvision

p = argparse.ArgumentParser()
p.add_argument("--cls-batch", type=int, default=128)
p.add_argument("--seg-batch", type=int, default=16)
p.add_argument("--seg-size", type=int, default=512)
p.add_argument("--steps", type=int, default=12)
p.add_argument("--max-entries", type=int, default=200000)
args = p.parse_args()


class MultiTaskNet(nn.Module):
    def __init__(self):
        super().__init__()
        r = torchvision.models.resnet50()
        self.trunk = nn.Sequential(*list(r.children())[:-2])
        self.cls_head = nn.Linear(2048, 1000)
        self.seg_head = nn.Sequential(nn.Conv2d(2048, 256, 3, padding=1), nn.BatchNorm2d(256), nn.ReLU(),
                                      nn.Conv2d(256, 21, 1))

    def forward(self, x, task):
        f = self.trunk(x)
        if task == "cls":
            return self.cls_head(f.mean((2, 3)))
        return F.interpolate(self.seg_head(f), size=x.shape[-2:], mode="bilinear", align_corners=False)


torch.manual_seed(0)
device = torch.device("cuda")
model = MultiTaskNet().to(device)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.05)
gen = torch.Generator().manual_seed(1)
torch._C._cuda_attach_out_of_memory_observer(
    lambda device, alloc, device_alloc, device_free: torch.cuda.memory._dump_snapshot("oom_snapshot.pickle"))


def batch_of(task):
    if task == "cls":
        return (torch.rand(args.cls_batch, 3, 224, 224, generator=gen),
                torch.randint(1000, (args.cls_batch,), generator=gen))
    s = args.seg_size
    return torch.rand(args.seg_batch, 3, s, s, generator=gen), torch.randint(21, (args.seg_batch, s, s), generator=gen)


torch.cuda.memory._record_memory_history(max_entries=args.max_entries)
model.train()
for step in range(args.steps):
    task = ("cls", "seg")[step % 2]
    x, y = (t.to(device, non_blocking=True) for t in batch_of(task))
    with torch.autocast("cuda", dtype=torch.bfloat16):
        out = model(x, task)
    loss = F.cross_entropy(out.float(), y)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()
    print(f"step {step} task {task} loss {loss.item():.4f}", flush=True)
