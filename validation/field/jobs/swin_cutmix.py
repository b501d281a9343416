"""Swin-V2 classification as torchvision's reference recipe trains it: swin_v2_t from torchvision.models,
CutMix or MixUp per batch (torchvision.transforms.v2, on the GPU batch), label smoothing, channels_last,
cudnn.benchmark, bf16 autocast, AdamW, gradient clipping, and a model EMA (AveragedModel with an EMA update) that
is evaluated every --eval-every steps at a larger resolution and batch (FixRes-style) under torch.inference_mode.
Random images. History starts mid-run at step --history-from as a ring of --max-entries (the job had been
running); the snapshot is dumped by the OOM observer.
"""
import argparse
import torch, torch.nn.functional as F, torchvision
from torch.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn
from torchvision.transforms import v2

p = argparse.ArgumentParser()
p.add_argument("--batch", type=int, default=96)
p.add_argument("--res", type=int, default=224)
p.add_argument("--eval-batch", type=int, default=256)
p.add_argument("--eval-res", type=int, default=288)
p.add_argument("--eval-every", type=int, default=8)
p.add_argument("--steps", type=int, default=20)
p.add_argument("--history-from", type=int, default=3)
p.add_argument("--max-entries", type=int, default=60000)
args = p.parse_args()

torch.backends.cudnn.benchmark = True
torch._C._cuda_attach_out_of_memory_observer(
    lambda device, alloc, device_alloc, device_free: torch.cuda.memory._dump_snapshot("oom_snapshot.pickle"))
model = torchvision.models.swin_v2_t(num_classes=1000).cuda().to(memory_format=torch.channels_last)
ema = AveragedModel(model, multi_avg_fn=get_ema_multi_avg_fn(0.9998), use_buffers=True)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.05)
mix = v2.RandomChoice([v2.CutMix(num_classes=1000, alpha=1.0), v2.MixUp(num_classes=1000, alpha=0.8)])
for step in range(args.steps):
    if step == args.history_from:
        torch.cuda.memory._record_memory_history(max_entries=args.max_entries)
    model.train()
    images = torch.randn(args.batch, 3, args.res, args.res, device="cuda")
    images, targets = mix(images, torch.randint(0, 1000, (args.batch,), device="cuda"))
    images = images.contiguous(memory_format=torch.channels_last)
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = F.cross_entropy(model(images), targets, label_smoothing=0.1)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 5.0)
    opt.step()
    ema.update_parameters(model)
    if (step + 1) % args.eval_every == 0:
        ema.eval()
        with torch.inference_mode(), torch.autocast("cuda", dtype=torch.bfloat16):
            val = torch.randn(args.eval_batch, 3, args.eval_res, args.eval_res, device="cuda")
            top1 = ema(val.contiguous(memory_format=torch.channels_last)).argmax(1)
        print(f"step {step + 1}: loss {loss.item():.3f} ema top1[0] {top1[0].item()}", flush=True)
