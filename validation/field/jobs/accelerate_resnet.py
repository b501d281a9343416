"""Image classification with HF Accelerate as its examples run it (cv_example.py: Accelerator(mixed_precision),
accelerator.prepare, accelerator.backward), with a torchvision ResNet in channels_last and progressive resizing
as fast.ai and FFCV's ResNet-50 recipe run it: the image size grows over the run (--sizes, a stage per size),
gradient accumulation through accelerator.accumulate, SGD with momentum and nesterov, label smoothing, random
images. History from the start; the snapshot is dumped by the OOM observer.
"""
import argparse
import torch, torch.nn.functional as F, torchvision
from accelerate import Accelerator

p = argparse.ArgumentParser()
p.add_argument("--arch", default="resnet50")
p.add_argument("--batch", type=int, default=192)
p.add_argument("--ga", type=int, default=2)
p.add_argument("--sizes", default="160,192,224")
p.add_argument("--steps-per-size", type=int, default=4)
p.add_argument("--max-entries", type=int, default=100000)
args = p.parse_args()

torch.cuda.memory._record_memory_history(max_entries=args.max_entries)
torch._C._cuda_attach_out_of_memory_observer(
    lambda device, alloc, device_alloc, device_free: torch.cuda.memory._dump_snapshot("oom_snapshot.pickle"))
accelerator = Accelerator(mixed_precision="bf16", gradient_accumulation_steps=args.ga)
model = getattr(torchvision.models, args.arch)().to(memory_format=torch.channels_last)
opt = torch.optim.SGD(model.parameters(), lr=0.5, momentum=0.9, nesterov=True, weight_decay=5e-5)
model, opt = accelerator.prepare(model, opt)
model.train()
step = 0
for size in [int(s) for s in args.sizes.split(",")]:
    for _ in range(args.steps_per_size * args.ga):
        x = torch.randn(args.batch, 3, size, size, device=accelerator.device).to(memory_format=torch.channels_last)
        y = torch.randint(0, 1000, (args.batch,), device=accelerator.device)
        with accelerator.accumulate(model):
            loss = F.cross_entropy(model(x), y, label_smoothing=0.1)
            accelerator.backward(loss)
            opt.step()
            opt.zero_grad(set_to_none=True)
        step += 1
        accelerator.print(f"step {step} size {size} loss {loss.item():.3f}")
