"""3D segmentation as MONAI's tutorials train it, in plain torch: a residual 3D U-Net trained on random 96^3 patches
(--batch patches a step, Dice + cross-entropy, AdamW, bf16 autocast), and every --eval-every steps a sliding-window
inference over whole validation volumes of changing extent (MONAI's sliding_window_inference, written out): windows
of 96^3 with 25% overlap run --sw-batch at a time under no_grad, their softmax outputs added with Gaussian importance
weights into a full-volume (classes x D x H x W) fp32 accumulator on the GPU, then divided by the weight map and
compared with the label by Dice. Random volumes. History from the start; the snapshot is dumped by the OOM observer.
"""
import argparse, itertools, math, random
import torch, torch.nn as nn, torch.nn.functional as F

p = argparse.ArgumentParser()
p.add_argument("--batch", type=int, default=4)
p.add_argument("--sw-batch", type=int, default=8)
p.add_argument("--classes", type=int, default=14)
p.add_argument("--width", type=int, default=32)
p.add_argument("--steps", type=int, default=12)
p.add_argument("--eval-every", type=int, default=4)
p.add_argument("--max-entries", type=int, default=150000)
args = p.parse_args()
ROI = 96

torch.cuda.memory._record_memory_history(max_entries=args.max_entries)
torch._C._cuda_attach_out_of_memory_observer(
    lambda device, alloc, device_alloc, device_free: torch.cuda.memory._dump_snapshot("oom_snapshot.pickle"))


class ResBlock(nn.Module):
    def __init__(self, cin, cout, stride=1):
        super().__init__()
        self.conv1 = nn.Conv3d(cin, cout, 3, stride, 1, bias=False)
        self.conv2 = nn.Conv3d(cout, cout, 3, 1, 1, bias=False)
        self.norm1, self.norm2 = nn.InstanceNorm3d(cout, affine=True), nn.InstanceNorm3d(cout, affine=True)
        self.skip = nn.Conv3d(cin, cout, 1, stride, bias=False) if (cin != cout or stride != 1) else nn.Identity()

    def forward(self, x):
        y = F.leaky_relu(self.norm1(self.conv1(x)), 0.01)
        return F.leaky_relu(self.norm2(self.conv2(y)) + self.skip(x), 0.01)


class UNet3D(nn.Module):
    def __init__(self):
        super().__init__()
        w = [args.width * 2 ** i for i in range(5)]
        self.down = nn.ModuleList([ResBlock(1, w[0])] + [ResBlock(w[i], w[i + 1], 2) for i in range(4)])
        self.up = nn.ModuleList(nn.ConvTranspose3d(w[i + 1], w[i], 2, 2) for i in reversed(range(4)))
        self.dec = nn.ModuleList(ResBlock(2 * w[i], w[i]) for i in reversed(range(4)))
        self.head = nn.Conv3d(w[0], args.classes, 1)

    def forward(self, x):
        skips = []
        for block in self.down:
            x = block(x)
            skips.append(x)
        x = skips.pop()
        for up, dec in zip(self.up, self.dec):
            x = dec(torch.cat([up(x), skips.pop()], 1))
        return self.head(x)


def dice_loss(logits, labels):
    probs = logits.float().softmax(1)
    onehot = F.one_hot(labels, args.classes).movedim(-1, 1).float()
    inter = (probs * onehot).sum([2, 3, 4])
    return 1 - ((2 * inter + 1e-5) / (probs.sum([2, 3, 4]) + onehot.sum([2, 3, 4]) + 1e-5)).mean()


def gaussian_weights():
    g = torch.exp(-0.5 * ((torch.arange(ROI, device="cuda") - (ROI - 1) / 2) / (ROI / 8)) ** 2)
    return (g[:, None, None] * g[None, :, None] * g[None, None, :]).clamp(min=1e-3)


def sliding_window_inference(volume):
    _, _, *shape = volume.shape
    starts = [sorted(set(list(range(0, s - ROI + 1, int(ROI * 0.75))) + [s - ROI])) for s in shape]
    windows = list(itertools.product(*starts))
    weights = gaussian_weights()
    out = torch.zeros(1, args.classes, *shape, device="cuda")
    count = torch.zeros(1, 1, *shape, device="cuda")
    for i in range(0, len(windows), args.sw_batch):
        batch = windows[i:i + args.sw_batch]
        crops = torch.cat([volume[:, :, d:d + ROI, h:h + ROI, w:w + ROI] for d, h, w in batch])
        with torch.autocast("cuda", dtype=torch.bfloat16):
            probs = model(crops).float().softmax(1)
        for (d, h, w), prob in zip(batch, probs):
            out[0, :, d:d + ROI, h:h + ROI, w:w + ROI] += prob * weights
            count[0, :, d:d + ROI, h:h + ROI, w:w + ROI] += weights
    return out / count


model = UNet3D().cuda()
opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=1e-5)
rng = random.Random(3)


def evaluate():
    model.eval()
    scores = []
    with torch.no_grad():
        for _ in range(2):
            shape = [rng.randrange(160, 320, 16) for _ in range(3)]
            volume = torch.randn(1, 1, *shape, device="cuda")
            label = torch.randint(0, args.classes, shape, device="cuda")
            pred = sliding_window_inference(volume).argmax(1)[0]
            scores.append(((pred == label).float().mean()).item())
    model.train()
    return sum(scores) / len(scores)


for step in range(args.steps):
    x = torch.randn(args.batch, 1, ROI, ROI, ROI, device="cuda")
    y = torch.randint(0, args.classes, (args.batch, ROI, ROI, ROI), device="cuda")
    with torch.autocast("cuda", dtype=torch.bfloat16):
        logits = model(x)
    loss = dice_loss(logits, y) + F.cross_entropy(logits.float(), y)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    print(f"step {step}: loss {loss.item():.4f}", flush=True)
    if (step + 1) % args.eval_every == 0:
        print(f"step {step}: val {evaluate():.4f}", flush=True)
