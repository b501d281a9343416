"""EfficientNet training as torchvision's classification reference (references/classification/train.py) runs its
EfficientNet-V2 recipe, re-expressed compactly, on random images.

torchvision.models.get_model(--model, weights=None), cudnn.benchmark, channels_last model and inputs, bf16 autocast
(no GradScaler), CrossEntropyLoss with label smoothing 0.1, SGD with momentum and --norm-weight-decay 0 (norm layers'
parameters in their own group, split by torchvision.ops._utils.split_normalization_params), the reference's
ExponentialMovingAverage (an AveragedModel with its own ema_avg and use_buffers=True, updated every
--model-ema-steps), MixUp/CutMix (transforms.v2, RandomChoice) on the GPU batch, train crop 300, and every
--eval-every steps an evaluation of the EMA model as the reference's evaluate() does it: fp32, inference_mode,
--val-resize-size/--val-crop-size 384, the training batch size. Images are made on the CPU with a seeded generator,
pinned and copied non_blocking as the reference's DataLoader(pin_memory=True) does. History from just before the
loop (the model and its EMA copy are made before it); the snapshot is dumped in an `except torch.OutOfMemoryError`
handler around the loop (training and evaluation). --model efficientnet_b3 (crop 300, eval 320/300) runs too, but
cudnn.benchmark's trials of its depthwise convolutions are slow: some 40 s per image size at batch 96.
"""
import argparse
import torch, torchvision
from torch import nn
from torchvision.transforms import v2

p = argparse.ArgumentParser()
p.add_argument("--model", default="efficientnet_v2_s")
p.add_argument("--batch", type=int, default=64)
p.add_argument("--steps", type=int, default=12)
p.add_argument("--classes", type=int, default=1000)
p.add_argument("--lr", type=float, default=0.1)
p.add_argument("--momentum", type=float, default=0.9)
p.add_argument("--weight-decay", type=float, default=2e-5)
p.add_argument("--norm-weight-decay", type=float, default=0.0)
p.add_argument("--label-smoothing", type=float, default=0.1)
p.add_argument("--mixup-alpha", type=float, default=0.2)
p.add_argument("--cutmix-alpha", type=float, default=1.0)
p.add_argument("--clip-grad-norm", type=float, default=None)
p.add_argument("--model-ema-steps", type=int, default=2)
p.add_argument("--model-ema-decay", type=float, default=0.99998)
p.add_argument("--train-crop-size", type=int, default=300)
p.add_argument("--val-resize-size", type=int, default=384)
p.add_argument("--val-crop-size", type=int, default=384)
p.add_argument("--eval-every", type=int, default=4)
p.add_argument("--eval-batch", type=int, default=None, help="default: --batch, as the reference's test loader")
p.add_argument("--eval-batches", type=int, default=2)
p.add_argument("--channels-last", action=argparse.BooleanOptionalAction, default=True)
p.add_argument("--max-entries", type=int, default=300000)
args = p.parse_args()


class ExponentialMovingAverage(torch.optim.swa_utils.AveragedModel):
    """Maintains moving averages of model parameters using an exponential decay (the reference's utils.py)."""

    def __init__(self, model, decay, device="cpu"):
        def ema_avg(avg_model_param, model_param, num_averaged):
            return decay * avg_model_param + (1 - decay) * model_param

        super().__init__(model, device, ema_avg, use_buffers=True)


def loader(batches, batch_size, resize, crop, seed):
    """Normalized random images (center-cropped from resize to crop) and labels, pinned as the DataLoader pins."""
    g = torch.Generator().manual_seed(seed)
    o = (resize - crop) // 2
    for _ in range(batches):
        image = torch.randn(batch_size, 3, resize, resize, generator=g)[..., o:o + crop, o:o + crop].contiguous()
        target = torch.randint(args.classes, (batch_size,), generator=g)
        yield image.pin_memory(), target.pin_memory()


def accuracy(output, target, topk=(1,)):
    """The reference's utils.accuracy: a mixed (soft) target counts as its largest class."""
    with torch.inference_mode():
        if target.ndim == 2:
            target = target.max(dim=1)[1]
        _, pred = output.topk(max(topk), 1, True, True)
        correct = pred.t().eq(target[None])
        return [correct[:k].flatten().sum(dtype=torch.float32) * (100.0 / target.size(0)) for k in topk]


def evaluate(model, criterion, data_loader, log_suffix=""):
    model.eval()
    header = f"Test: {log_suffix}"
    seen = acc1_sum = acc5_sum = 0.0
    with torch.inference_mode():
        for i, (image, target) in enumerate(data_loader):
            image = image.to(device, non_blocking=True).contiguous(memory_format=memory_format)
            target = target.to(device, non_blocking=True)
            output = model(image)
            loss = criterion(output, target)
            acc1, acc5 = accuracy(output, target, topk=(1, 5))
            print(f"{header}  [{i}/{args.eval_batches}]  loss: {loss.item():.4f}  acc1: {acc1.item():.4f}  "
                  f"acc5: {acc5.item():.4f}", flush=True)
            seen += image.shape[0]
            acc1_sum += acc1.item() * image.shape[0]
            acc5_sum += acc5.item() * image.shape[0]
    print(f"{header} Acc@1 {acc1_sum / seen:.3f} Acc@5 {acc5_sum / seen:.3f}", flush=True)


torch.manual_seed(0)
torch.backends.cudnn.benchmark = True
device = torch.device("cuda")
memory_format = torch.channels_last if args.channels_last else torch.contiguous_format
model = torchvision.models.get_model(args.model, weights=None, num_classes=args.classes)
model.to(device, memory_format=memory_format)
criterion = nn.CrossEntropyLoss(label_smoothing=args.label_smoothing)
param_groups = torchvision.ops._utils.split_normalization_params(model)
wd_groups = [args.norm_weight_decay, args.weight_decay]
parameters = [{"params": p, "weight_decay": w} for p, w in zip(param_groups, wd_groups) if p]
optimizer = torch.optim.SGD(parameters, lr=args.lr, momentum=args.momentum, weight_decay=args.weight_decay)
mixup_cutmix = []
if args.mixup_alpha > 0:
    mixup_cutmix.append(v2.MixUp(alpha=args.mixup_alpha, num_classes=args.classes))
if args.cutmix_alpha > 0:
    mixup_cutmix.append(v2.CutMix(alpha=args.cutmix_alpha, num_classes=args.classes))
mixup_cutmix = v2.RandomChoice(mixup_cutmix) if mixup_cutmix else None
# The reference's decay adjustment (n_GPUs x batch x EMA steps / epochs), with the recipe's 600 epochs.
alpha = min(1.0, (1.0 - args.model_ema_decay) * args.batch * args.model_ema_steps / 600)
model_ema = ExponentialMovingAverage(model, device=device, decay=1.0 - alpha)
eval_batch = args.eval_batch or args.batch
width = len(str(args.steps))

torch.cuda.memory._record_memory_history(max_entries=args.max_entries)
try:
    for i, (image, target) in enumerate(loader(args.steps, args.batch, args.train_crop_size,
                                               args.train_crop_size, seed=0)):
        image, target = image.to(device, non_blocking=True), target.to(device, non_blocking=True)
        if mixup_cutmix is not None:
            image, target = mixup_cutmix(image, target)
        image = image.contiguous(memory_format=memory_format)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            output = model(image)
            loss = criterion(output, target)
        optimizer.zero_grad()
        loss.backward()
        if args.clip_grad_norm is not None:
            nn.utils.clip_grad_norm_(model.parameters(), args.clip_grad_norm)
        optimizer.step()
        if i % args.model_ema_steps == 0:
            model_ema.update_parameters(model)
        acc1, acc5 = accuracy(output, target, topk=(1, 5))
        print(f"Epoch: [0]  [{i:{width}d}/{args.steps}]  lr: {optimizer.param_groups[0]['lr']}  "
              f"loss: {loss.item():.4f}  acc1: {acc1.item():.4f}  acc5: {acc5.item():.4f}  "
              f"max mem: {torch.cuda.max_memory_allocated() / 2**20:.0f}", flush=True)
        if (i + 1) % args.eval_every == 0:
            evaluate(model_ema, criterion, loader(args.eval_batches, eval_batch, args.val_resize_size,
                                                  args.val_crop_size, seed=1), log_suffix="EMA")
except torch.OutOfMemoryError:
    torch.cuda.memory._dump_snapshot("oom_snapshot.pickle")
    raise
