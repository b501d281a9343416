"""ImageNet training with the timm library's own pieces, as its train.py wires them, on random images.

timm.create_model (drop path), timm.data.create_loader with use_prefetcher=True (timm's PrefetchLoader: the batch
copied and normalized on a side CUDA stream, random erasing on the GPU), timm.data.Mixup (MixUp and CutMix),
SoftTargetCrossEntropy, timm.optim.create_optimizer_v2 (AdamW, no weight decay on norms and biases), timm's
NativeScaler (GradScaler, gradient clipping), ModelEmaV3 and the cosine scheduler stepped per update. The dataset is
PIL images of random pixels at 256 px, made in the loader's workers and cropped by timm's training transform.
History from the start; the snapshot is dumped in an `except torch.OutOfMemoryError` handler.
"""
import argparse
import numpy as np
import torch
import timm
from PIL import Image
from timm.data import Mixup, create_loader, resolve_data_config
from timm.loss import SoftTargetCrossEntropy
from timm.optim import create_optimizer_v2
from timm.scheduler import create_scheduler_v2
from timm.utils import ModelEmaV3, NativeScaler

p = argparse.ArgumentParser()
p.add_argument("--model", default="vit_base_patch16_224")
p.add_argument("--batch", type=int, default=192)
p.add_argument("--steps", type=int, default=12)
p.add_argument("--workers", type=int, default=6)
p.add_argument("--amp-dtype", default="bfloat16")
args = p.parse_args()


class RandomImages(torch.utils.data.Dataset):
    def __init__(self, n):
        self.n, self.transform = n, None

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        pixels = np.random.default_rng(i).integers(0, 256, (256, 256, 3), dtype=np.uint8)
        image = Image.fromarray(pixels)
        return (self.transform(image) if self.transform else image), i % 1000


torch.cuda.memory._record_memory_history(max_entries=100000)
model = timm.create_model(args.model, num_classes=1000, drop_path_rate=0.1).cuda()
data_config = resolve_data_config({}, model=model)
loader = create_loader(RandomImages(args.batch * (args.steps + 1)), input_size=data_config["input_size"],
                       batch_size=args.batch, is_training=True, use_prefetcher=True, re_prob=0.25, re_mode="pixel",
                       mean=data_config["mean"], std=data_config["std"], num_workers=args.workers,
                       pin_memory=True, interpolation="bicubic")
mixup = Mixup(mixup_alpha=0.8, cutmix_alpha=1.0, label_smoothing=0.1, num_classes=1000)
criterion = SoftTargetCrossEntropy()
optimizer = create_optimizer_v2(model, opt="adamw", lr=1e-3, weight_decay=0.05)
scheduler, _ = create_scheduler_v2(optimizer, sched="cosine", num_epochs=1, warmup_epochs=0,
                                   updates_per_epoch=args.steps, step_on_epochs=False)
loss_scaler = NativeScaler()
ema = ModelEmaV3(model, decay=0.9998)
amp_dtype = getattr(torch, args.amp_dtype)
try:
    for step, (images, targets) in enumerate(loader):
        if step == args.steps:
            break
        images, targets = mixup(images, targets)
        with torch.autocast("cuda", dtype=amp_dtype):
            loss = criterion(model(images), targets)
        optimizer.zero_grad(set_to_none=True)
        loss_scaler(loss, optimizer, clip_grad=1.0, parameters=model.parameters())
        ema.update(model, step=step)
        scheduler.step_update(num_updates=step + 1)
        if step % 4 == 0:
            print(f"step {step} loss {loss.item():.3f}", flush=True)
except torch.OutOfMemoryError:
    torch.cuda.memory._dump_snapshot("oom_snapshot.pickle")
    raise
