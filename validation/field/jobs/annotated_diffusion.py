"""DDPM training as Hugging Face's blog post "The Annotated Diffusion Model" writes it: its U-Net (ResNet blocks with
GroupNorm and scale-shift time conditioning, linear attention at every resolution, full attention in the middle,
dim_mults (1, 2, 4, 8)), a linear beta schedule of 1000 steps, random timesteps per image, the Huber loss, Adam.
Every --sample-every steps a few reverse-diffusion steps sample a batch under no_grad, as users watch samples.
Random images of one size. History from the start; the snapshot is dumped by the OOM observer.
"""
import argparse, math
from functools import partial
import torch, torch.nn as nn, torch.nn.functional as F

p = argparse.ArgumentParser()
p.add_argument("--dim", type=int, default=64)
p.add_argument("--image-size", type=int, default=128)
p.add_argument("--batch", type=int, default=64)
p.add_argument("--sample-batch", type=int, default=64)
p.add_argument("--sample-every", type=int, default=4)
p.add_argument("--sample-steps", type=int, default=3)
p.add_argument("--steps", type=int, default=10)
p.add_argument("--max-entries", type=int, default=100000)
args = p.parse_args()


class Residual(nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, x, *a, **k):
        return self.fn(x, *a, **k) + x


def upsample(dim, dim_out):
    return nn.Sequential(nn.Upsample(scale_factor=2, mode="nearest"), nn.Conv2d(dim, dim_out, 3, padding=1))


def downsample(dim, dim_out):  # the post's pixel-unshuffle downsampling
    return nn.Sequential(nn.PixelUnshuffle(2), nn.Conv2d(dim * 4, dim_out, 1))


class SinusoidalPositionEmbeddings(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, time):
        half = self.dim // 2
        e = torch.exp(torch.arange(half, device=time.device) * -(math.log(10000) / (half - 1)))
        e = time[:, None] * e[None, :]
        return torch.cat((e.sin(), e.cos()), dim=-1)


class WeightStandardizedConv2d(nn.Conv2d):
    def forward(self, x):
        eps = 1e-5 if x.dtype == torch.float32 else 1e-3
        w = self.weight
        mean = w.mean(dim=(1, 2, 3), keepdim=True)
        var = w.var(dim=(1, 2, 3), keepdim=True, unbiased=False)
        return F.conv2d(x, (w - mean) * (var + eps).rsqrt(), self.bias, self.stride, self.padding)


class Block(nn.Module):
    def __init__(self, dim, dim_out, groups=8):
        super().__init__()
        self.proj, self.norm, self.act = WeightStandardizedConv2d(dim, dim_out, 3, padding=1), nn.GroupNorm(
            groups, dim_out), nn.SiLU()

    def forward(self, x, scale_shift=None):
        x = self.norm(self.proj(x))
        if scale_shift is not None:
            scale, shift = scale_shift
            x = x * (scale + 1) + shift
        return self.act(x)


class ResnetBlock(nn.Module):
    def __init__(self, dim, dim_out, time_emb_dim, groups=8):
        super().__init__()
        self.mlp = nn.Sequential(nn.SiLU(), nn.Linear(time_emb_dim, dim_out * 2))
        self.block1, self.block2 = Block(dim, dim_out, groups), Block(dim_out, dim_out, groups)
        self.res_conv = nn.Conv2d(dim, dim_out, 1) if dim != dim_out else nn.Identity()

    def forward(self, x, time_emb):
        t = self.mlp(time_emb)[:, :, None, None]
        h = self.block1(x, scale_shift=t.chunk(2, dim=1))
        return self.block2(h) + self.res_conv(x)


class Attention(nn.Module):
    def __init__(self, dim, heads=4, dim_head=32):
        super().__init__()
        self.scale, self.heads = dim_head ** -0.5, heads
        self.to_qkv = nn.Conv2d(dim, heads * dim_head * 3, 1, bias=False)
        self.to_out = nn.Conv2d(heads * dim_head, dim, 1)

    def forward(self, x):
        b, c, h, w = x.shape
        q, k, v = (t.reshape(b, self.heads, -1, h * w) for t in self.to_qkv(x).chunk(3, dim=1))
        sim = torch.einsum("bhdi,bhdj->bhij", q * self.scale, k)
        attn = (sim - sim.amax(dim=-1, keepdim=True).detach()).softmax(dim=-1)
        out = torch.einsum("bhij,bhdj->bhid", attn, v)
        return self.to_out(out.permute(0, 1, 3, 2).reshape(b, -1, h, w))


class LinearAttention(nn.Module):
    def __init__(self, dim, heads=4, dim_head=32):
        super().__init__()
        self.scale, self.heads = dim_head ** -0.5, heads
        self.to_qkv = nn.Conv2d(dim, heads * dim_head * 3, 1, bias=False)
        self.to_out = nn.Sequential(nn.Conv2d(heads * dim_head, dim, 1), nn.GroupNorm(1, dim))

    def forward(self, x):
        b, c, h, w = x.shape
        q, k, v = (t.reshape(b, self.heads, -1, h * w) for t in self.to_qkv(x).chunk(3, dim=1))
        q, k = q.softmax(dim=-2) * self.scale, k.softmax(dim=-1)
        context = torch.einsum("bhdn,bhen->bhde", k, v)
        out = torch.einsum("bhde,bhdn->bhen", context, q)
        return self.to_out(out.reshape(b, -1, h, w))


class PreNorm(nn.Module):
    def __init__(self, dim, fn):
        super().__init__()
        self.fn, self.norm = fn, nn.GroupNorm(1, dim)

    def forward(self, x):
        return self.fn(self.norm(x))


class Unet(nn.Module):
    def __init__(self, dim, dim_mults=(1, 2, 4, 8), channels=3):
        super().__init__()
        self.init_conv = nn.Conv2d(channels, dim, 1)
        dims = [dim, *map(lambda m: dim * m, dim_mults)]
        in_out = list(zip(dims[:-1], dims[1:]))
        time_dim = dim * 4
        block = partial(ResnetBlock, time_emb_dim=time_dim)
        self.time_mlp = nn.Sequential(SinusoidalPositionEmbeddings(dim), nn.Linear(dim, time_dim), nn.GELU(),
                                      nn.Linear(time_dim, time_dim))
        self.downs, self.ups = nn.ModuleList([]), nn.ModuleList([])
        for i, (din, dout) in enumerate(in_out):
            last = i >= len(in_out) - 1
            down = downsample(din, dout) if not last else nn.Conv2d(din, dout, 3, padding=1)
            self.downs.append(nn.ModuleList([block(din, din), block(din, din),
                                             Residual(PreNorm(din, LinearAttention(din))), down]))
        mid = dims[-1]
        self.mid_block1, self.mid_attn = block(mid, mid), Residual(PreNorm(mid, Attention(mid)))
        self.mid_block2 = block(mid, mid)
        for i, (din, dout) in enumerate(reversed(in_out)):
            last = i == len(in_out) - 1
            self.ups.append(nn.ModuleList([block(dout + din, dout), block(dout + din, dout),
                                           Residual(PreNorm(dout, LinearAttention(dout))),
                                           upsample(dout, din) if not last else nn.Conv2d(dout, din, 3, padding=1)]))
        self.final_res_block = block(dim * 2, dim)
        self.final_conv = nn.Conv2d(dim, channels, 1)

    def forward(self, x, time):
        x = self.init_conv(x)
        r = x.clone()
        t = self.time_mlp(time)
        h = []
        for block1, block2, attn, down in self.downs:
            x = block1(x, t)
            h.append(x)
            x = attn(block2(x, t))
            h.append(x)
            x = down(x)
        x = self.mid_block2(self.mid_attn(self.mid_block1(x, t)), t)
        for block1, block2, attn, up in self.ups:
            x = block1(torch.cat((x, h.pop()), dim=1), t)
            x = attn(block2(torch.cat((x, h.pop()), dim=1), t))
            x = up(x)
        x = self.final_res_block(torch.cat((x, r), dim=1), t)
        return self.final_conv(x)


timesteps = 1000
betas = torch.linspace(0.0001, 0.02, timesteps)
alphas_cumprod = torch.cumprod(1.0 - betas, dim=0)
sqrt_alphas_cumprod, sqrt_one_minus = alphas_cumprod.sqrt(), (1.0 - alphas_cumprod).sqrt()
sqrt_recip_alphas = (1.0 / (1.0 - betas)).sqrt()


def extract(a, t, shape):
    return a.to(t.device).gather(-1, t)[:, None, None, None].expand(shape[0], 1, 1, 1)


def p_losses(model, x_start, t):
    noise = torch.randn_like(x_start)
    x_noisy = extract(sqrt_alphas_cumprod, t, x_start.shape) * x_start + extract(sqrt_one_minus, t,
                                                                                 x_start.shape) * noise
    return F.smooth_l1_loss(noise, model(x_noisy, t))


@torch.no_grad()
def sample(model):
    img = torch.randn(args.sample_batch, 3, args.image_size, args.image_size, device="cuda")
    for i in reversed(range(timesteps - args.sample_steps, timesteps)):
        t = torch.full((args.sample_batch,), i, device="cuda", dtype=torch.long)
        coef = extract(betas, t, img.shape) / extract(sqrt_one_minus, t, img.shape)
        img = extract(sqrt_recip_alphas, t, img.shape) * (img - coef * model(img, t))
    return img


torch.cuda.memory._record_memory_history(max_entries=args.max_entries)
torch._C._cuda_attach_out_of_memory_observer(
    lambda device, alloc, device_alloc, device_free: torch.cuda.memory._dump_snapshot("oom_snapshot.pickle"))
model = Unet(args.dim).cuda()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
for step in range(args.steps):
    optimizer.zero_grad()
    batch = torch.rand(args.batch, 3, args.image_size, args.image_size, device="cuda") * 2 - 1
    t = torch.randint(0, timesteps, (args.batch,), device="cuda").long()
    loss = p_losses(model, batch, t)
    loss.backward()
    optimizer.step()
    print(f"step {step} loss {loss.item():.4f}", flush=True)
    if step % args.sample_every == args.sample_every - 1:
        model.eval()
        print(f"sampled {tuple(sample(model).shape)}", flush=True)
        model.train()
