"""Progressive resizing as fast.ai's ImageNet recipes and the DAWNBench entries run it: a torchvision ResNet-50
trained at small images first, the side growing at fixed points of the schedule (--sizes, --steps-per-size steps
each), so every stage's batches are larger than any before them. bf16 autocast, SGD with Nesterov momentum,
label smoothing, channels_last. Random images and labels (seeded). History from the start; the snapshot is dumped
in the except handler, with the loop's log line per step as the recipe prints it.
"""
import argparse
import torch, torch.nn as nn, torchvision

p = argparse.ArgumentParser()
p.add_argument("--batch", type=int, default=192)
p.add_argument("--sizes", default="128,160,192,224")
p.add_argument("--steps-per-size", type=int, default=3)
p.add_argument("--max-entries", type=int, default=200000)
args = p.parse_args()
sizes = [int(s) for s in args.sizes.split(",")]

torch.manual_seed(0)
device = torch.device("cuda")
model = torchvision.models.resnet50(num_classes=1000).to(device, memory_format=torch.channels_last)
criterion = nn.CrossEntropyLoss(label_smoothing=0.1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, nesterov=True, weight_decay=5e-5)
gen = torch.Generator().manual_seed(1)
total = len(sizes) * args.steps_per_size

torch.cuda.memory._record_memory_history(max_entries=args.max_entries)
try:
    model.train()
    step = 0
    for size in sizes:
        print(f"stage: images of {size} px, batch {args.batch}", flush=True)
        for _ in range(args.steps_per_size):
            images = torch.rand(args.batch, 3, size, size, generator=gen).to(device, memory_format=torch.channels_last)
            target = torch.randint(1000, (args.batch,), generator=gen).to(device)
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = criterion(model(images), target)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            print(f"[{step + 1}/{total}] size {size} loss {loss.item():.4f}", flush=True)
            step += 1
except torch.OutOfMemoryError:
    torch.cuda.memory._dump_snapshot("oom_snapshot.pickle")
    raise
