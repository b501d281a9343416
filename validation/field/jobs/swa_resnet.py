"""Stochastic Weight Averaging of a ResNet-50 in torchvision's classification recipe, on random images.

The training is torchvision's references/classification recipe (train.py, presets.py, transforms.py): resnet50
(weights=None), channels_last, bf16 autocast, SGD with momentum 0.9, nesterov and weight decay 1e-4,
CrossEntropyLoss(label_smoothing=0.1), and MixUp or CutMix from torchvision.transforms.v2 (a RandomChoice of the two,
num_classes 1000) applied to each batch once it is on the GPU. The data is an ImageFolder stand-in: --images random
uint8 images of 3 x --image-size^2 held in CPU memory with random labels, whose __getitem__ returns the recipe's train
preset (RandomResizedCrop to --crop, a random horizontal flip, ToDtype float32 scaled, Normalize), through a DataLoader
of --workers worker processes with pin_memory; --epochs epochs of --steps-per-epoch batches of --batch.
SWA is PyTorch's docs' recipe (torch.optim.swa_utils): a CosineAnnealingLR schedule until epoch --swa-start; from
that epoch on, swa_model = AveragedModel(model) on the GPU (use_buffers=False, the default, as the docs use it), a
SWALR schedule, and swa_model.update_parameters(model) at each epoch's end. After the last epoch,
torch.optim.swa_utils.update_bn(bn_loader, swa_model, device) recomputes the BatchNorm statistics over --bn-batches
batches of --bn-batch train-preset images (users hand it their train loader, with a larger batch since no gradients
are kept): update_bn runs the model in train mode and outside autocast, so in fp32. Then the SWA model is evaluated
under torch.no_grad() in eval mode, fp32 as the recipe's evaluate() does, over --eval-batches batches of --eval-batch
images with the recipe's eval preset (Resize --val-resize, CenterCrop --val-crop).
What is random: the images and labels (a generator seeded from --seed), the crops, flips, shuffles, MixUp/CutMix draws
and the weights' initialisation; all are seeded from --seed (the loaders' generators, torch.manual_seed), so the data
is the same from run to run. cudnn.benchmark (the recipe's default) only with --benchmark: its trial workspaces,
sized to what is free, would set the peak and shrink under a smaller budget. fp32 weights, bf16 activations in
training, fp32 in update_bn and the evaluation. History from the start (a ring of --max-entries); the snapshot is
dumped by the OOM observer, as PyTorch's "understanding GPU memory" post shows.
"""
import argparse
import torch, torch.nn as nn, torchvision
from torch.optim.swa_utils import AveragedModel, SWALR
from torchvision.transforms import v2

p = argparse.ArgumentParser()
p.add_argument("--arch", default="resnet50")
p.add_argument("--batch", type=int, default=256)
p.add_argument("--epochs", type=int, default=4)
p.add_argument("--steps-per-epoch", type=int, default=8)
p.add_argument("--lr", type=float, default=0.1)
p.add_argument("--swa-start", type=int, default=2, help="first epoch of the SWA phase")
p.add_argument("--swa-lr", type=float, default=0.05)
p.add_argument("--swa-anneal-epochs", type=int, default=2)
p.add_argument("--mixup-alpha", type=float, default=0.2)
p.add_argument("--cutmix-alpha", type=float, default=1.0)
p.add_argument("--images", type=int, default=1024, help="distinct random images held in memory")
p.add_argument("--image-size", type=int, default=256)
p.add_argument("--crop", type=int, default=224, help="train crop size")
p.add_argument("--val-resize", type=int, default=232)
p.add_argument("--val-crop", type=int, default=224)
p.add_argument("--workers", type=int, default=4)
p.add_argument("--bn-batch", type=int, default=512)
p.add_argument("--bn-batches", type=int, default=4)
p.add_argument("--eval-batch", type=int, default=1024)
p.add_argument("--eval-batches", type=int, default=2)
p.add_argument("--seed", type=int, default=0)
p.add_argument("--benchmark", action="store_true", help="torch.backends.cudnn.benchmark (the recipe's; off here)")
p.add_argument("--max-entries", type=int, default=200000)
args = p.parse_args()

torch.cuda.memory._record_memory_history(max_entries=args.max_entries)
torch._C._cuda_attach_out_of_memory_observer(
    lambda device, alloc, device_alloc, device_free: torch.cuda.memory._dump_snapshot("oom_snapshot.pickle"))
torch.backends.cudnn.benchmark = args.benchmark
torch.manual_seed(args.seed)
device = torch.device("cuda")

MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
train_preset = v2.Compose([
    v2.RandomResizedCrop(args.crop, antialias=True),
    v2.RandomHorizontalFlip(),
    v2.ToDtype(torch.float32, scale=True),
    v2.Normalize(mean=MEAN, std=STD),
])
eval_preset = v2.Compose([
    v2.Resize(args.val_resize, antialias=True),
    v2.CenterCrop(args.val_crop),
    v2.ToDtype(torch.float32, scale=True),
    v2.Normalize(mean=MEAN, std=STD),
])
gen = torch.Generator().manual_seed(args.seed)
images = torch.randint(0, 256, (args.images, 3, args.image_size, args.image_size), dtype=torch.uint8, generator=gen)
labels = torch.randint(0, 1000, (args.images,), generator=gen)


class RandomImageFolder(torch.utils.data.Dataset):
    """Stands in for torchvision.datasets.ImageFolder: `length` samples drawn from the images held in memory."""

    def __init__(self, length, transform):
        self.length, self.transform = length, transform

    def __len__(self):
        return self.length

    def __getitem__(self, i):
        j = i % len(images)
        return self.transform(images[j]), int(labels[j])


def loader(length, batch, transform, shuffle, seed):
    return torch.utils.data.DataLoader(RandomImageFolder(length, transform), batch_size=batch, shuffle=shuffle,
                                       num_workers=args.workers, pin_memory=True, drop_last=shuffle,
                                       generator=torch.Generator().manual_seed(seed))


def gib(n):
    return n / 2**30


train_loader = loader(args.steps_per_epoch * args.batch, args.batch, train_preset, True, args.seed + 1)
model = getattr(torchvision.models, args.arch)(weights=None, num_classes=1000)
model = model.to(device).to(memory_format=torch.channels_last)
criterion = nn.CrossEntropyLoss(label_smoothing=0.1)
optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9, nesterov=True, weight_decay=1e-4)
scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=args.epochs)
mixup_cutmix = v2.RandomChoice([v2.MixUp(alpha=args.mixup_alpha, num_classes=1000),
                                v2.CutMix(alpha=args.cutmix_alpha, num_classes=1000)])
swa_model, swa_scheduler = None, None

for epoch in range(args.epochs):
    if epoch >= args.swa_start and swa_model is None:
        swa_model = AveragedModel(model)  # a deep copy of the model, on the GPU as the model is
        swa_scheduler = SWALR(optimizer, swa_lr=args.swa_lr, anneal_epochs=args.swa_anneal_epochs)
        print(f"epoch {epoch}: SWA starts, allocated {gib(torch.cuda.memory_allocated()):.2f} GiB", flush=True)
    model.train()
    for step, (image, target) in enumerate(train_loader):
        image = image.to(device, non_blocking=True)
        target = target.to(device, non_blocking=True)
        image, target = mixup_cutmix(image, target)
        image = image.contiguous(memory_format=torch.channels_last)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            output = model(image)
            loss = criterion(output, target)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        print(f"epoch {epoch} step {step} loss {loss.item():.4f} lr {optimizer.param_groups[0]['lr']:.4f} "
              f"allocated {gib(torch.cuda.memory_allocated()):.2f} GiB", flush=True)
    if swa_model is not None:
        swa_model.update_parameters(model)
        swa_scheduler.step()
    else:
        scheduler.step()
    print(f"epoch {epoch} done, swa models averaged {0 if swa_model is None else int(swa_model.n_averaged)}, "
          f"allocated {gib(torch.cuda.memory_allocated()):.2f} GiB", flush=True)

if swa_model is None:  # --swa-start past the last epoch: average the final weights alone
    swa_model = AveragedModel(model)
    swa_model.update_parameters(model)

# Update bn statistics for the swa_model at the end (the docs' call), over a train loader of a larger batch.
bn_loader = loader(args.bn_batches * args.bn_batch, args.bn_batch, train_preset, True, args.seed + 2)
torch.optim.swa_utils.update_bn(bn_loader, swa_model, device)
print(f"update_bn done over {len(bn_loader)} batches of {args.bn_batch}, "
      f"allocated {gib(torch.cuda.memory_allocated()):.2f} GiB", flush=True)

eval_loader = loader(args.eval_batches * args.eval_batch, args.eval_batch, eval_preset, False, args.seed + 3)
swa_model.eval()
with torch.no_grad():
    for step, (image, target) in enumerate(eval_loader):
        image = image.to(device, non_blocking=True).contiguous(memory_format=torch.channels_last)
        target = target.to(device, non_blocking=True)
        output = swa_model(image)
        loss = criterion(output, target)
        acc1 = (output.argmax(dim=1) == target).float().mean().item() * 100
        print(f"eval step {step} loss {loss.item():.4f} acc1 {acc1:.2f} "
              f"allocated {gib(torch.cuda.memory_allocated()):.2f} GiB", flush=True)
print(f"done: max allocated {gib(torch.cuda.max_memory_allocated()):.2f} GiB", flush=True)
