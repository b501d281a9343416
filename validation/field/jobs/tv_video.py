"""Video classification as torchvision's video reference trains it (R(2+1)D-18 on clips): SGD with momentum,
fp16 autocast with GradScaler, cudnn.benchmark, on random clips. The clip shape follows a multigrid
schedule's short cycle (SlowFast's recipe: frames × crop varies per batch, the batch size kept), so
batches differ in size. History from the start; the snapshot is dumped by the OOM observer, and with
--dump-on-error also where a RuntimeError is caught (a library's own allocation failure, such as cuBLAS
creating a handle, reaches neither the observer nor an OutOfMemoryError handler).
"""
import argparse, random
import torch, torch.nn.functional as F, torchvision

p = argparse.ArgumentParser()
p.add_argument("--arch", default="r2plus1d_18")
p.add_argument("--batch", type=int, default=24)
p.add_argument("--steps", type=int, default=12)
p.add_argument("--shapes", default="8x112,16x112,16x144,24x128", help="frames x crop, one per batch at random")
p.add_argument("--max-entries", type=int, default=100000)
p.add_argument("--dump-on-error", action="store_true",
               help="also dump where a RuntimeError is caught (fragscope doctor asks so after a library's OOM)")
args = p.parse_args()

torch.backends.cudnn.benchmark = True
torch.cuda.memory._record_memory_history(max_entries=args.max_entries)


def oom_observer(device, alloc, device_alloc, device_free):
    torch.cuda.memory._dump_snapshot("oom_snapshot.pickle")


torch._C._cuda_attach_out_of_memory_observer(oom_observer)
model = getattr(torchvision.models.video, args.arch)(num_classes=400).cuda()
opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=1e-4)
scaler = torch.amp.GradScaler("cuda")
shapes = [tuple(int(v) for v in s.split("x")) for s in args.shapes.split(",")]
rng = random.Random(0)


def train():
    for step in range(args.steps):
        frames, crop = rng.choice(shapes)
        clip = torch.randn(args.batch, 3, frames, crop, crop, device="cuda")
        target = torch.randint(0, 400, (args.batch,), device="cuda")
        with torch.autocast("cuda", dtype=torch.float16):
            loss = F.cross_entropy(model(clip), target)
        opt.zero_grad()
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        print(f"step {step} clip {frames}x{crop} loss {loss.item():.3f}", flush=True)


try:
    train()
except RuntimeError:
    if args.dump_on_error:
        torch.cuda.memory._dump_snapshot("error_snapshot.pickle")
    raise
