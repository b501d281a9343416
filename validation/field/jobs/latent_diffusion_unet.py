"""Text-to-image latent-diffusion training as diffusers' examples/text_to_image/train_text_to_image.py runs it, written
by hand without diffusers (users who want the loop without the library): a UNet2DConditionModel-shaped network
(conv_in; three CrossAttnDownBlock2D and a DownBlock2D of ResnetBlock2D with Transformer2DModel self- and
cross-attention; UNetMidBlock2DCrossAttn; the mirrored up blocks, which concatenate the skips; GroupNorm, SiLU,
conv_out), block_out_channels --base-channels x (1, 2, 4, 4), attention heads of --head-dim, GEGLU feed-forwards,
cross-attention to the last hidden state of a frozen text encoder (a tiny random-init CLIPTextModel from
transformers in fp16, run under no_grad on random 77-token captions). The example's step: latents 4 x 64 x 64
(--resolution 512 / 8; random here, as the VAE's scaled latents would be), noise, random timesteps, the DDPM
scheduler's add_noise (scaled_linear betas 0.00085-0.012, 1000 steps), epsilon prediction, the MSE loss with the
example's min-SNR weighting (--snr-gamma 5; 0: plain MSE), fp16 mixed precision as accelerate does it (autocast
around the UNet's forward, torch.amp.GradScaler, unscale and clip_grad_norm 1.0), AdamW (lr 1e-4, weight decay
1e-2), --use-ema (default on): the example's EMAModel, a copy of the UNet's parameters on the GPU stepped after
every optimizer step, and --gradient-checkpointing (default on) of every ResNet and transformer block
(torch.utils.checkpoint, use_reentrant=False, as diffusers does). History is turned on at step --history-from
(1: after the first step, as a user adding it mid-run; a ring of --max-entries); the snapshot is dumped in the
except handler.
"""
import argparse, math
import torch, torch.nn as nn, torch.nn.functional as F
from torch.utils.checkpoint import checkpoint
from transformers import CLIPTextConfig, CLIPTextModel

p = argparse.ArgumentParser()
p.add_argument("--base-channels", type=int, default=192, help="block_out_channels[0], a multiple of 32 (SD: 320)")
p.add_argument("--layers-per-block", type=int, default=2)
p.add_argument("--head-dim", type=int, default=64)
p.add_argument("--text-dim", type=int, default=512)
p.add_argument("--text-layers", type=int, default=4)
p.add_argument("--resolution", type=int, default=512, help="the images' side; the latents' is resolution / 8")
p.add_argument("--batch", type=int, default=16)
p.add_argument("--steps", type=int, default=12)
p.add_argument("--lr", type=float, default=1e-4)
p.add_argument("--snr-gamma", type=float, default=5.0)
p.add_argument("--max-grad-norm", type=float, default=1.0)
p.add_argument("--use-ema", action=argparse.BooleanOptionalAction, default=True)
p.add_argument("--ema-decay", type=float, default=0.9999)
p.add_argument("--gradient-checkpointing", action=argparse.BooleanOptionalAction, default=True)
p.add_argument("--history-from", type=int, default=1)
p.add_argument("--max-entries", type=int, default=100000)
args = p.parse_args()


def maybe_checkpoint(module, *inputs):
    if args.gradient_checkpointing and torch.is_grad_enabled():
        return checkpoint(module, *inputs, use_reentrant=False)
    return module(*inputs)


def get_timestep_embedding(timesteps, dim, max_period=10000):
    """Sinusoidal timestep embedding, flip_sin_to_cos=True and freq_shift 0 as Stable Diffusion's UNet has it."""
    half = dim // 2
    exponent = -math.log(max_period) * torch.arange(half, dtype=torch.float32, device=timesteps.device) / half
    emb = timesteps[:, None].float() * torch.exp(exponent)[None, :]
    return torch.cat([torch.cos(emb), torch.sin(emb)], dim=-1)


class ResnetBlock2D(nn.Module):
    def __init__(self, cin, cout, temb_ch):
        super().__init__()
        self.norm1 = nn.GroupNorm(32, cin, eps=1e-5)
        self.conv1 = nn.Conv2d(cin, cout, 3, padding=1)
        self.time_emb_proj = nn.Linear(temb_ch, cout)
        self.norm2 = nn.GroupNorm(32, cout, eps=1e-5)
        self.conv2 = nn.Conv2d(cout, cout, 3, padding=1)
        self.conv_shortcut = nn.Conv2d(cin, cout, 1) if cin != cout else None

    def forward(self, x, temb):
        h = self.conv1(F.silu(self.norm1(x)))
        h = h + self.time_emb_proj(F.silu(temb))[:, :, None, None]
        h = self.conv2(F.silu(self.norm2(h)))
        if self.conv_shortcut is not None:
            x = self.conv_shortcut(x)
        return x + h


class Attention(nn.Module):
    def __init__(self, dim, heads, context_dim=None):
        super().__init__()
        self.heads = heads
        self.to_q = nn.Linear(dim, dim, bias=False)
        self.to_k = nn.Linear(context_dim or dim, dim, bias=False)
        self.to_v = nn.Linear(context_dim or dim, dim, bias=False)
        self.to_out = nn.Linear(dim, dim)

    def forward(self, x, context=None):
        context = x if context is None else context
        b, n, c = x.shape
        q, k, v = (t.view(b, -1, self.heads, c // self.heads).transpose(1, 2)
                   for t in (self.to_q(x), self.to_k(context), self.to_v(context)))
        out = F.scaled_dot_product_attention(q, k, v)
        return self.to_out(out.transpose(1, 2).reshape(b, n, c))


class FeedForward(nn.Module):
    def __init__(self, dim, mult=4):
        super().__init__()
        self.proj = nn.Linear(dim, dim * mult * 2)  # GEGLU
        self.out = nn.Linear(dim * mult, dim)

    def forward(self, x):
        h, gate = self.proj(x).chunk(2, dim=-1)
        return self.out(h * F.gelu(gate))


class BasicTransformerBlock(nn.Module):
    def __init__(self, dim, heads, context_dim):
        super().__init__()
        self.norm1, self.attn1 = nn.LayerNorm(dim), Attention(dim, heads)
        self.norm2, self.attn2 = nn.LayerNorm(dim), Attention(dim, heads, context_dim)
        self.norm3, self.ff = nn.LayerNorm(dim), FeedForward(dim)

    def forward(self, x, context):
        x = self.attn1(self.norm1(x)) + x
        x = self.attn2(self.norm2(x), context) + x
        return self.ff(self.norm3(x)) + x


class Transformer2DModel(nn.Module):
    def __init__(self, ch, context_dim):
        super().__init__()
        self.norm = nn.GroupNorm(32, ch, eps=1e-6)
        self.proj_in = nn.Linear(ch, ch)  # use_linear_projection, as SD 2's UNet
        self.transformer_block = BasicTransformerBlock(ch, ch // args.head_dim, context_dim)
        self.proj_out = nn.Linear(ch, ch)

    def forward(self, x, context):
        b, c, h, w = x.shape
        residual = x
        x = self.norm(x).permute(0, 2, 3, 1).reshape(b, h * w, c)
        x = maybe_checkpoint(self.transformer_block, self.proj_in(x), context)
        x = self.proj_out(x).reshape(b, h, w, c).permute(0, 3, 1, 2).contiguous()
        return x + residual


class DownBlock(nn.Module):
    def __init__(self, cin, cout, temb_ch, context_dim, layers, attention, downsample):
        super().__init__()
        self.resnets = nn.ModuleList(ResnetBlock2D(cin if j == 0 else cout, cout, temb_ch) for j in range(layers))
        self.attentions = (nn.ModuleList(Transformer2DModel(cout, context_dim) for _ in range(layers))
                           if attention else None)
        self.downsampler = nn.Conv2d(cout, cout, 3, stride=2, padding=1) if downsample else None

    def forward(self, h, temb, context):
        outputs = []
        for j, resnet in enumerate(self.resnets):
            h = maybe_checkpoint(resnet, h, temb)
            if self.attentions is not None:
                h = self.attentions[j](h, context)
            outputs.append(h)
        if self.downsampler is not None:
            h = self.downsampler(h)
            outputs.append(h)
        return h, outputs


class UpBlock(nn.Module):
    def __init__(self, cin, cout, prev_ch, temb_ch, context_dim, layers, attention, upsample):
        super().__init__()
        self.resnets = nn.ModuleList(
            ResnetBlock2D((prev_ch if j == 0 else cout) + (cin if j == layers - 1 else cout), cout, temb_ch)
            for j in range(layers))
        self.attentions = (nn.ModuleList(Transformer2DModel(cout, context_dim) for _ in range(layers))
                           if attention else None)
        self.upsampler = nn.Conv2d(cout, cout, 3, padding=1) if upsample else None

    def forward(self, h, skips, temb, context):
        for j, resnet in enumerate(self.resnets):
            h = maybe_checkpoint(resnet, torch.cat([h, skips.pop()], dim=1), temb)
            if self.attentions is not None:
                h = self.attentions[j](h, context)
        if self.upsampler is not None:
            h = self.upsampler(F.interpolate(h, scale_factor=2.0, mode="nearest"))
        return h


class MidBlock(nn.Module):
    def __init__(self, ch, temb_ch, context_dim):
        super().__init__()
        self.resnets = nn.ModuleList([ResnetBlock2D(ch, ch, temb_ch), ResnetBlock2D(ch, ch, temb_ch)])
        self.attention = Transformer2DModel(ch, context_dim)

    def forward(self, h, temb, context):
        h = maybe_checkpoint(self.resnets[0], h, temb)
        h = self.attention(h, context)
        return maybe_checkpoint(self.resnets[1], h, temb)


class UNet2DConditionModel(nn.Module):
    def __init__(self, base, context_dim, layers):
        super().__init__()
        channels = [base, 2 * base, 4 * base, 4 * base]
        temb_ch = 4 * base
        self.base = base
        self.conv_in = nn.Conv2d(4, base, 3, padding=1)
        self.time_embedding = nn.Sequential(nn.Linear(base, temb_ch), nn.SiLU(), nn.Linear(temb_ch, temb_ch))
        self.down_blocks = nn.ModuleList()
        out_ch = base
        for i, ch in enumerate(channels):
            in_ch, out_ch = out_ch, ch
            last = i == len(channels) - 1
            self.down_blocks.append(DownBlock(in_ch, out_ch, temb_ch, context_dim, layers, not last, not last))
        self.mid_block = MidBlock(channels[-1], temb_ch, context_dim)
        self.up_blocks = nn.ModuleList()
        reversed_channels = channels[::-1]
        out_ch = reversed_channels[0]
        for i, ch in enumerate(reversed_channels):
            prev_ch, out_ch = out_ch, ch
            in_ch = reversed_channels[min(i + 1, len(channels) - 1)]
            last = i == len(channels) - 1
            self.up_blocks.append(UpBlock(in_ch, out_ch, prev_ch, temb_ch, context_dim, layers + 1, i > 0, not last))
        self.conv_norm_out = nn.GroupNorm(32, base, eps=1e-5)
        self.conv_out = nn.Conv2d(base, 4, 3, padding=1)

    def forward(self, sample, timesteps, encoder_hidden_states):
        temb = self.time_embedding(get_timestep_embedding(timesteps, self.base))
        h = self.conv_in(sample)
        skips = [h]
        for block in self.down_blocks:
            h, outputs = block(h, temb, encoder_hidden_states)
            skips += outputs
        h = self.mid_block(h, temb, encoder_hidden_states)
        for block in self.up_blocks:
            h = block(h, skips, temb, encoder_hidden_states)
        return self.conv_out(F.silu(self.conv_norm_out(h)))


class EMAModel:
    """diffusers.training_utils.EMAModel's arithmetic: shadow copies of the parameters, the decay (1 + n) / (10 + n)
    capped at --ema-decay, s_param -= (1 - decay) * (s_param - param) parameter by parameter."""

    def __init__(self, parameters, decay):
        self.shadow_params = [p_.clone().detach() for p_ in parameters]
        self.decay, self.optimization_step = decay, 0

    def get_decay(self, optimization_step):
        step = max(0, optimization_step - 1)
        return 0.0 if step <= 0 else min((1 + step) / (10 + step), self.decay)

    @torch.no_grad()
    def step(self, parameters):
        self.optimization_step += 1
        one_minus_decay = 1 - self.get_decay(self.optimization_step)
        for s_param, param in zip(self.shadow_params, parameters):
            if param.requires_grad:
                s_param.sub_(one_minus_decay * (s_param - param))
            else:
                s_param.copy_(param)

    def to(self, device):
        self.shadow_params = [p_.to(device) for p_ in self.shadow_params]
        return self


torch.manual_seed(0)
device = torch.device("cuda")
weight_dtype = torch.float16
text_encoder = CLIPTextModel(CLIPTextConfig(vocab_size=49408, hidden_size=args.text_dim,
                                            intermediate_size=4 * args.text_dim,
                                            num_hidden_layers=args.text_layers,
                                            num_attention_heads=args.text_dim // 64, max_position_embeddings=77))
text_encoder.requires_grad_(False)
text_encoder.eval()
text_encoder.to(device, dtype=weight_dtype)
unet = UNet2DConditionModel(args.base_channels, args.text_dim, args.layers_per_block)
print(f"UNet: {sum(p_.numel() for p_ in unet.parameters()) / 1e6:.1f}M parameters", flush=True)
ema_unet = EMAModel(unet.parameters(), args.ema_decay) if args.use_ema else None
unet.to(device)
if ema_unet is not None:
    ema_unet.to(device)
unet.train()
optimizer = torch.optim.AdamW(unet.parameters(), lr=args.lr, betas=(0.9, 0.999), weight_decay=1e-2, eps=1e-8)
scaler = torch.amp.GradScaler("cuda")

betas = torch.linspace(0.00085 ** 0.5, 0.012 ** 0.5, 1000, dtype=torch.float32) ** 2  # scaled_linear
alphas_cumprod = torch.cumprod(1.0 - betas, dim=0).to(device)


def add_noise(original_samples, noise, timesteps):
    a = alphas_cumprod[timesteps].view(-1, 1, 1, 1)
    return a.sqrt() * original_samples + (1 - a).sqrt() * noise


def compute_snr(timesteps):
    a = alphas_cumprod[timesteps]
    return a / (1 - a)  # (alpha / sigma) ** 2


gen = torch.Generator().manual_seed(1)
latent = args.resolution // 8


def next_batch():
    """A batch as the example's dataloader and VAE would give it: scaled latents and tokenized captions."""
    latents = torch.randn(args.batch, 4, latent, latent, generator=gen)
    input_ids = torch.randint(1, 49406, (args.batch, 77), generator=gen)
    input_ids[:, 0] = 49406  # <|startoftext|>
    for row, n in zip(input_ids, torch.randint(4, 76, (args.batch,), generator=gen).tolist()):
        row[n:] = 49407  # <|endoftext|>, then padding to max_length with it, as SD's tokenizer pads
    return latents.to(device, non_blocking=True), input_ids.to(device, non_blocking=True)


try:
    for step in range(args.steps):
        if step == args.history_from:
            torch.cuda.memory._record_memory_history(max_entries=args.max_entries)
        latents, input_ids = next_batch()
        noise = torch.randn_like(latents)
        bsz = latents.shape[0]
        timesteps = torch.randint(0, 1000, (bsz,), device=latents.device).long()
        noisy_latents = add_noise(latents, noise, timesteps)
        with torch.no_grad():
            encoder_hidden_states = text_encoder(input_ids)[0]
        target = noise  # prediction_type "epsilon"
        with torch.autocast("cuda", dtype=torch.float16):
            model_pred = unet(noisy_latents, timesteps, encoder_hidden_states)
        if args.snr_gamma:
            snr = compute_snr(timesteps)
            mse_loss_weights = torch.stack([snr, args.snr_gamma * torch.ones_like(timesteps)], dim=1).min(dim=1)[0]
            mse_loss_weights = mse_loss_weights / snr
            loss = F.mse_loss(model_pred.float(), target.float(), reduction="none")
            loss = (loss.mean(dim=list(range(1, len(loss.shape)))) * mse_loss_weights).mean()
        else:
            loss = F.mse_loss(model_pred.float(), target.float(), reduction="mean")
        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(unet.parameters(), args.max_grad_norm)
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad(set_to_none=True)
        if ema_unet is not None:
            ema_unet.step(unet.parameters())
        print(f"step {step} loss {loss.item():.4f} scale {scaler.get_scale():.0f}", flush=True)
except torch.OutOfMemoryError:
    torch.cuda.memory._dump_snapshot("oom_snapshot.pickle")
    raise
