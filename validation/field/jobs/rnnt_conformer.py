"""A Conformer transducer (RNN-T) for speech recognition, as torchaudio's recipes and NeMo train it, on random audio.

Log-mel features (80 bins) subsampled ×4 by a convolution front end, torchaudio's Conformer encoder, an LSTM
prediction network over the transcript, a joiner that adds both and projects every (frame, token) pair to the
vocabulary: the B × T × (U + 1) × V joint is the memory RNN-T is known for. The loss is torchaudio's rnnt_loss where
this torchaudio has it, else the transducer's forward variable computed in PyTorch (one logcumsumexp per frame, as
pure-PyTorch RNN-T losses do). Utterances of random length (1-16 s), transcripts about one token per 8 frames,
padded per batch; bf16 autocast for the encoder, AdamW, gradient clipping. History from the start; the snapshot is
dumped in an `except torch.OutOfMemoryError` handler.
"""
import argparse, random
import torch, torch.nn as nn, torch.nn.functional as F

p = argparse.ArgumentParser()
p.add_argument("--batch", type=int, default=32)
p.add_argument("--dim", type=int, default=256)
p.add_argument("--layers", type=int, default=8)
p.add_argument("--vocab", type=int, default=1024)
p.add_argument("--max-frames", type=int, default=1600)
p.add_argument("--steps", type=int, default=12)
args = p.parse_args()

try:
    from torchaudio.models import Conformer
except ImportError:  # a torchaudio without its models: the same block count from PyTorch's own layers
    Conformer = None
try:
    from torchaudio.functional import rnnt_loss
except ImportError:
    rnnt_loss = None


def rnnt_loss_pytorch(logits, targets, logit_lengths, target_lengths, blank):
    lp = logits.float().log_softmax(-1)
    B, T, U1, _ = lp.shape
    blank_lp = lp[..., blank]
    emit_lp = torch.gather(lp[:, :, :-1], 3, targets[:, None, :, None].expand(-1, T, -1, 1)).squeeze(3)
    # alpha[t, u] = logaddexp(alpha[t-1, u] + blank[t-1, u], alpha[t, u-1] + emit[t, u-1]): the emits along u
    # are a log-space linear recurrence, solved per frame by a cumulative sum and a logcumsumexp.
    first = torch.full((B, U1), -1e4, device=lp.device)
    first[:, 0] = 0
    alphas = []
    carried = first
    for t in range(T):
        cum = F.pad(torch.cumsum(emit_lp[:, t], dim=1), (1, 0))
        alpha = cum + torch.logcumsumexp(carried - cum, dim=1)
        alphas.append(alpha)
        carried = alpha + blank_lp[:, t]
    alphas = torch.stack(alphas, dim=1)
    rows = torch.arange(B, device=lp.device)
    last = alphas[rows, logit_lengths - 1, target_lengths] + blank_lp[rows, logit_lengths - 1, target_lengths]
    return -last.mean()


class Transducer(nn.Module):
    def __init__(self):
        super().__init__()
        d = args.dim
        self.subsample = nn.Sequential(nn.Conv2d(1, d, 3, stride=2), nn.ReLU(), nn.Conv2d(d, d, 3, stride=2), nn.ReLU())
        self.project = nn.Linear(d * 19, d)
        if Conformer is not None:
            self.encoder = Conformer(input_dim=d, num_heads=4, ffn_dim=4 * d, num_layers=args.layers,
                                     depthwise_conv_kernel_size=31, dropout=0.1)
        else:
            layer = nn.TransformerEncoderLayer(d, 4, 4 * d, 0.1, batch_first=True)
            self.encoder = nn.TransformerEncoder(layer, args.layers)
        self.embed = nn.Embedding(args.vocab, d)
        self.predictor = nn.LSTM(d, d, num_layers=1, batch_first=True)
        self.join_enc, self.join_pred = nn.Linear(d, 640), nn.Linear(d, 640)
        self.out = nn.Linear(640, args.vocab)

    def forward(self, feats, frames, tokens):
        x = self.subsample(feats.unsqueeze(1))  # B, d, T/4, 19
        x = self.project(x.permute(0, 2, 1, 3).flatten(2))
        lengths = torch.clamp(((frames - 1) // 2 - 1) // 2, max=x.shape[1])
        if Conformer is not None:
            x, _ = self.encoder(x, lengths)
        else:
            mask = torch.arange(x.shape[1], device=x.device)[None] >= lengths[:, None]
            x = self.encoder(x, src_key_padding_mask=mask)
        blank_first = F.pad(tokens, (1, 0), value=0)
        pred, _ = self.predictor(self.embed(blank_first))
        joint = torch.tanh(self.join_enc(x).unsqueeze(2) + self.join_pred(pred).unsqueeze(1))
        return self.out(joint), lengths


torch.cuda.memory._record_memory_history(max_entries=100000)
model = Transducer().cuda()
optimizer = torch.optim.AdamW(model.parameters(), lr=5e-4, weight_decay=1e-3)
rng = random.Random(11)
try:
    for step in range(args.steps):
        frames = torch.tensor([rng.randint(100, args.max_frames) for _ in range(args.batch)])
        tokens_per = torch.clamp(frames // 8 + torch.randint(-5, 6, (args.batch,)), min=4)
        feats = torch.randn(args.batch, int(frames.max()), 80, device="cuda")
        tokens = torch.randint(1, args.vocab, (args.batch, int(tokens_per.max())), device="cuda")
        frames, tokens_per = frames.cuda(), tokens_per.cuda()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits, lengths = model(feats, frames, tokens)
        if rnnt_loss is not None:
            loss = rnnt_loss(logits.float(), tokens.int(), lengths.int(), tokens_per.int(), blank=0)
        else:
            loss = rnnt_loss_pytorch(logits, tokens, lengths, tokens_per, blank=0)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        print(f"step {step} frames {int(frames.max())} tokens {int(tokens_per.max())} loss {loss.item():.3f}",
              flush=True)
except torch.OutOfMemoryError:
    torch.cuda.memory._dump_snapshot("oom_snapshot.pickle")
    raise
