"""FLIP (Li et al. 2023): CLIP trained with most image patches dropped, as open_clip's patch_dropout does it, with the
masking ratio drawn per step between --min-keep and --max-keep (a curriculum users add): a ViT-B/16 image tower over
the kept patches only and a 12-layer text transformer over captions of random lengths padded to the batch's longest;
symmetric InfoNCE with a learned temperature, bf16 autocast, AdamW. History from step --history-from; the snapshot
is dumped by the OOM observer.
"""
import argparse
import torch, torch.nn as nn, torch.nn.functional as F

p = argparse.ArgumentParser()
p.add_argument("--batch", type=int, default=512)
p.add_argument("--image", type=int, default=224)
p.add_argument("--min-keep", type=float, default=0.25)
p.add_argument("--max-keep", type=float, default=0.5)
p.add_argument("--steps", type=int, default=14)
p.add_argument("--history-from", type=int, default=1)
p.add_argument("--max-entries", type=int, default=100000)
args = p.parse_args()
patches = (args.image // 16) ** 2

torch._C._cuda_attach_out_of_memory_observer(
    lambda device, alloc, device_alloc, device_free: torch.cuda.memory._dump_snapshot("oom_snapshot.pickle"))


def tower(dim, layers, heads):
    layer = nn.TransformerEncoderLayer(dim, heads, 4 * dim, dropout=0.0, activation="gelu", batch_first=True,
                                       norm_first=True)
    return nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)


class FLIP(nn.Module):
    def __init__(self):
        super().__init__()
        self.patch = nn.Conv2d(3, 768, 16, 16)
        self.image_pos = nn.Parameter(torch.zeros(1, patches, 768))
        self.image_tower, self.image_proj = tower(768, 12, 12), nn.Linear(768, 512, bias=False)
        self.token = nn.Embedding(49408, 512)
        self.text_pos = nn.Parameter(torch.zeros(1, 77, 512))
        self.text_tower, self.text_proj = tower(512, 12, 8), nn.Linear(512, 512, bias=False)
        self.logit_scale = nn.Parameter(torch.tensor(2.659))

    def forward(self, images, keep, text, lengths):
        x = self.patch(images).flatten(2).transpose(1, 2) + self.image_pos
        kept = torch.rand(x.shape[:2], device=x.device).argsort(1)[:, :keep]
        x = torch.gather(x, 1, kept[..., None].expand(-1, -1, x.shape[-1]))
        image = self.image_proj(self.image_tower(x).mean(1))
        t = self.token(text) + self.text_pos[:, :text.shape[1]]
        causal = nn.Transformer.generate_square_subsequent_mask(text.shape[1], device=t.device)
        t = self.text_tower(t, mask=causal, is_causal=True)
        text_feat = self.text_proj(t[torch.arange(t.shape[0], device=t.device), lengths - 1])
        return F.normalize(image, dim=-1), F.normalize(text_feat, dim=-1)


torch.manual_seed(0)
model = FLIP().cuda()
opt = torch.optim.AdamW(model.parameters(), lr=5e-4, weight_decay=0.2)
gen = torch.Generator().manual_seed(8)
for step in range(args.steps):
    if step == args.history_from:
        torch.cuda.memory._record_memory_history(max_entries=args.max_entries)
    ratio = args.min_keep + (args.max_keep - args.min_keep) * float(torch.rand(1, generator=gen))
    keep = max(1, int(patches * ratio))
    images = torch.randn(args.batch, 3, args.image, args.image, generator=gen).cuda()
    lengths = torch.randint(5, 78, (args.batch,), generator=gen)
    text = torch.randint(1, 49408, (args.batch, int(lengths.max())), generator=gen).cuda()
    with torch.autocast("cuda", dtype=torch.bfloat16):
        image, text_feat = model(images, keep, text, lengths.cuda())
        logits = model.logit_scale.exp() * image @ text_feat.t()
        target = torch.arange(args.batch, device="cuda")
        loss = (F.cross_entropy(logits.float(), target) + F.cross_entropy(logits.t().float(), target)) / 2
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    print(f"step {step}: kept {keep} of {patches} loss {loss.item():.3f}", flush=True)
