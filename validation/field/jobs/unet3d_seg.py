"""3D segmentation with a U-Net as medical-imaging loops train it (nnU-Net style), on random volumes.

Conv3d encoder-decoder with instance norm and LeakyReLU, skip connections, deep supervision off; random patches
whose size varies per step (anisotropic crops from --sizes), fp16 autocast with a GradScaler, gradient clipping
(clip_grad_norm_), SGD with Nesterov momentum, cudnn.benchmark, Dice + cross-entropy loss. History from the start;
the snapshot is dumped by the OOM observer.
"""
import argparse, random
import torch, torch.nn as nn, torch.nn.functional as F

p = argparse.ArgumentParser()
p.add_argument("--width", type=int, default=32)
p.add_argument("--batch", type=int, default=2)
p.add_argument("--steps", type=int, default=16)
p.add_argument("--sizes", default="96x128x128,112x144x144,128x160x160,80x192x192")
p.add_argument("--max-entries", type=int, default=100000)
args = p.parse_args()

torch.backends.cudnn.benchmark = True
torch.cuda.memory._record_memory_history(max_entries=args.max_entries)
torch._C._cuda_attach_out_of_memory_observer(
    lambda device, alloc, device_alloc, device_free: torch.cuda.memory._dump_snapshot("oom_snapshot.pickle"))


def block(cin, cout, stride=1):
    return nn.Sequential(nn.Conv3d(cin, cout, 3, stride, 1), nn.InstanceNorm3d(cout, affine=True),
                         nn.LeakyReLU(0.01, inplace=True), nn.Conv3d(cout, cout, 3, 1, 1),
                         nn.InstanceNorm3d(cout, affine=True), nn.LeakyReLU(0.01, inplace=True))


class UNet3D(nn.Module):
    def __init__(self, width, classes=4, depth=5):
        super().__init__()
        chans = [min(width * 2 ** i, 320) for i in range(depth)]
        self.down = nn.ModuleList([block(1, chans[0])] +
                                  [block(chans[i - 1], chans[i], 2) for i in range(1, depth)])
        self.up = nn.ModuleList([nn.ConvTranspose3d(chans[i], chans[i - 1], 2, 2) for i in range(depth - 1, 0, -1)])
        self.merge = nn.ModuleList([block(2 * chans[i - 1], chans[i - 1]) for i in range(depth - 1, 0, -1)])
        self.head = nn.Conv3d(chans[0], classes, 1)

    def forward(self, x):
        skips = []
        for down in self.down:
            x = down(x)
            skips.append(x)
        for up, merge, skip in zip(self.up, self.merge, reversed(skips[:-1])):
            x = merge(torch.cat([up(x), skip], 1))
        return self.head(x)


def dice_ce(logits, target):
    ce = F.cross_entropy(logits, target)
    probs = logits.float().softmax(1)
    onehot = F.one_hot(target, logits.shape[1]).permute(0, 4, 1, 2, 3).float()
    inter = (probs * onehot).sum((2, 3, 4))
    dice = (2 * inter + 1e-5) / (probs.sum((2, 3, 4)) + onehot.sum((2, 3, 4)) + 1e-5)
    return ce + 1 - dice.mean()


model = UNet3D(args.width).cuda()
opt = torch.optim.SGD(model.parameters(), lr=1e-2, momentum=0.99, nesterov=True, weight_decay=3e-5)
scaler = torch.amp.GradScaler("cuda")
sizes = [tuple(int(v) for v in s.split("x")) for s in args.sizes.split(",")]
rng = random.Random(3)
for step in range(args.steps):
    d, h, w = rng.choice(sizes)
    x = torch.randn(args.batch, 1, d, h, w, device="cuda")
    y = torch.randint(0, 4, (args.batch, d, h, w), device="cuda")
    with torch.autocast("cuda", dtype=torch.float16):
        loss = dice_ce(model(x), y)
    scaler.scale(loss).backward()
    scaler.unscale_(opt)
    torch.nn.utils.clip_grad_norm_(model.parameters(), 12)
    scaler.step(opt)
    scaler.update()
    opt.zero_grad(set_to_none=True)
    if step % 4 == 0:
        print(f"step {step} patch {d}x{h}x{w} loss {loss.item():.3f}", flush=True)
