"""Tacotron 2 trained as NVIDIA's reference does it: a character encoder (embedding, three 5-wide convolutions, a
bidirectional LSTM), an autoregressive decoder run with teacher forcing in a Python loop over the mel frames
(prenet, an attention LSTMCell, location-sensitive attention over the encoder outputs, a decoder LSTMCell, a linear
to --frames-per-step mel frames and a stop token), a five-layer convolutional postnet. Utterances of random lengths
(mel frames ≈ 6 × characters), padded to the batch's longest; masked MSE + BCE, fp32, Adam, clipping at 1.0. History
from the start as a ring of --max-entries; the snapshot is dumped by the OOM observer.
"""
import argparse
import torch, torch.nn as nn, torch.nn.functional as F

p = argparse.ArgumentParser()
p.add_argument("--batch", type=int, default=48)
p.add_argument("--min-chars", type=int, default=40)
p.add_argument("--max-chars", type=int, default=160)
p.add_argument("--frames-per-step", type=int, default=2)
p.add_argument("--steps", type=int, default=10)
p.add_argument("--max-entries", type=int, default=100000)
args = p.parse_args()
n_mel, enc_dim, rnn_dim, att_dim = 80, 512, 1024, 128

torch._C._cuda_attach_out_of_memory_observer(
    lambda device, alloc, device_alloc, device_free: torch.cuda.memory._dump_snapshot("oom_snapshot.pickle"))
torch.cuda.memory._record_memory_history(max_entries=args.max_entries)


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(148, enc_dim)
        self.convs = nn.ModuleList(nn.Sequential(nn.Conv1d(enc_dim, enc_dim, 5, padding=2), nn.BatchNorm1d(enc_dim),
                                                 nn.ReLU(), nn.Dropout(0.5)) for _ in range(3))
        self.lstm = nn.LSTM(enc_dim, enc_dim // 2, batch_first=True, bidirectional=True)

    def forward(self, chars):
        x = self.embed(chars).transpose(1, 2)
        for conv in self.convs:
            x = conv(x)
        return self.lstm(x.transpose(1, 2))[0]


class Decoder(nn.Module):
    def __init__(self):
        super().__init__()
        r = args.frames_per_step
        self.prenet = nn.Sequential(nn.Linear(n_mel * r, 256), nn.ReLU(), nn.Dropout(0.5), nn.Linear(256, 256),
                                    nn.ReLU(), nn.Dropout(0.5))
        self.attention_rnn = nn.LSTMCell(256 + enc_dim, rnn_dim)
        self.query = nn.Linear(rnn_dim, att_dim, bias=False)
        self.memory = nn.Linear(enc_dim, att_dim, bias=False)
        self.location_conv = nn.Conv1d(2, 32, 31, padding=15, bias=False)
        self.location = nn.Linear(32, att_dim, bias=False)
        self.energy = nn.Linear(att_dim, 1, bias=False)
        self.decoder_rnn = nn.LSTMCell(rnn_dim + enc_dim, rnn_dim)
        self.to_mel = nn.Linear(rnn_dim + enc_dim, n_mel * r)
        self.to_stop = nn.Linear(rnn_dim + enc_dim, 1)

    def forward(self, memory, mask, mels):
        b, t_enc, _ = memory.shape
        r = args.frames_per_step
        frames = mels.transpose(1, 2).reshape(b, -1, n_mel * r)
        keys = self.memory(memory)
        h_att = c_att = h_dec = c_dec = memory.new_zeros(b, rnn_dim)
        weights = cumulative = memory.new_zeros(b, t_enc)
        context = memory.new_zeros(b, enc_dim)
        prev = memory.new_zeros(b, n_mel * r)
        outs, stops = [], []
        for t in range(frames.shape[1]):
            h_att, c_att = self.attention_rnn(torch.cat([self.prenet(prev), context], -1), (h_att, c_att))
            loc = self.location(self.location_conv(torch.stack([weights, cumulative], 1)).transpose(1, 2))
            energies = self.energy(torch.tanh(self.query(h_att)[:, None] + keys + loc)).squeeze(-1)
            weights = energies.masked_fill(~mask, float("-inf")).softmax(-1)
            cumulative = cumulative + weights
            context = torch.bmm(weights[:, None], memory).squeeze(1)
            h_dec, c_dec = self.decoder_rnn(torch.cat([h_att, context], -1), (h_dec, c_dec))
            out = torch.cat([h_dec, context], -1)
            outs.append(self.to_mel(out))
            stops.append(self.to_stop(out))
            prev = frames[:, t]
        mel = torch.stack(outs, 1).reshape(b, -1, n_mel).transpose(1, 2)
        return mel, torch.cat(stops, 1)


class Postnet(nn.Module):
    def __init__(self):
        super().__init__()
        chans = [n_mel, 512, 512, 512, 512, n_mel]
        self.convs = nn.ModuleList(nn.Sequential(nn.Conv1d(a, c, 5, padding=2), nn.BatchNorm1d(c))
                                   for a, c in zip(chans[:-1], chans[1:]))

    def forward(self, x):
        for i, conv in enumerate(self.convs):
            x = conv(x)
            x = torch.tanh(x) if i < len(self.convs) - 1 else x
        return x


torch.manual_seed(0)
encoder, decoder, postnet = Encoder().cuda(), Decoder().cuda(), Postnet().cuda()
params = [*encoder.parameters(), *decoder.parameters(), *postnet.parameters()]
opt = torch.optim.Adam(params, lr=1e-3, weight_decay=1e-6)
gen = torch.Generator().manual_seed(6)
for step in range(args.steps):
    chars = torch.randint(args.min_chars, args.max_chars + 1, (args.batch,), generator=gen)
    frames = (chars * 6 + torch.randint(-20, 21, (args.batch,), generator=gen)).clamp(min=60)
    frames = frames + (-frames) % args.frames_per_step
    t_enc, t_mel = int(chars.max()), int(frames.max())
    text = torch.randint(1, 148, (args.batch, t_enc), generator=gen)
    mask = torch.arange(t_enc)[None] < chars[:, None]
    text[~mask] = 0
    mel = torch.randn(args.batch, n_mel, t_mel, generator=gen)
    mel_mask = (torch.arange(t_mel)[None] < frames[:, None]).cuda()
    text, mask, mel = text.cuda(), mask.cuda(), mel.cuda()
    memory = encoder(text)
    mel_out, stop = decoder(memory, mask, mel)
    mel_post = mel_out + postnet(mel_out)
    m = mel_mask[:, None].float()
    loss = ((mel_out - mel) ** 2 * m).sum() / m.sum() / n_mel + ((mel_post - mel) ** 2 * m).sum() / m.sum() / n_mel
    stop_target = (torch.arange(t_mel, device="cuda")[None] >= frames.cuda()[:, None] - 1).float()
    loss = loss + F.binary_cross_entropy_with_logits(stop.repeat_interleave(args.frames_per_step, 1), stop_target)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(params, 1.0)
    opt.step()
    print(f"step {step}: chars {t_enc} frames {t_mel} loss {loss.item():.3f}", flush=True)
