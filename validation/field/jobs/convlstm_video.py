"""Next-frame video prediction with a ConvLSTM encoder-forecaster (Shi et al. 2015), as Moving-MNIST tutorials train
it: three stacked ConvLSTM cells (one 3×3 convolution over [input, hidden] to four gates per cell), unrolled in a
Python loop over each clip's context frames (a random number between --min-context and --max-context per batch),
then over --horizon predicted frames fed back as inputs; a 1×1 convolution to the frame; MSE, bf16 autocast, Adam.
Every --eval-every steps a longer rollout (2 × --horizon) of a larger batch under torch.no_grad. Random clips.
History from the start; the snapshot is dumped in the except handler.
"""
import argparse
import torch, torch.nn as nn, torch.nn.functional as F

p = argparse.ArgumentParser()
p.add_argument("--batch", type=int, default=16)
p.add_argument("--eval-batch", type=int, default=64)
p.add_argument("--side", type=int, default=64)
p.add_argument("--hidden", type=int, default=96)
p.add_argument("--min-context", type=int, default=6)
p.add_argument("--max-context", type=int, default=12)
p.add_argument("--horizon", type=int, default=8)
p.add_argument("--steps", type=int, default=14)
p.add_argument("--eval-every", type=int, default=5)
p.add_argument("--max-entries", type=int, default=100000)
args = p.parse_args()


class ConvLSTMCell(nn.Module):
    def __init__(self, cin, hidden):
        super().__init__()
        self.hidden = hidden
        self.gates = nn.Conv2d(cin + hidden, 4 * hidden, 3, padding=1)

    def forward(self, x, state):
        h, c = state
        i, f, o, g = self.gates(torch.cat([x, h], 1)).chunk(4, 1)
        c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
        h = torch.sigmoid(o) * torch.tanh(c)
        return h, c


class Forecaster(nn.Module):
    def __init__(self):
        super().__init__()
        self.cells = nn.ModuleList([ConvLSTMCell(1, args.hidden), ConvLSTMCell(args.hidden, args.hidden),
                                    ConvLSTMCell(args.hidden, args.hidden)])
        self.to_frame = nn.Conv2d(args.hidden, 1, 1)

    def step(self, frame, states):
        x, new = frame, []
        for cell, state in zip(self.cells, states):
            h, c = cell(x, state)
            new.append((h, c))
            x = h
        return torch.sigmoid(self.to_frame(x)), new

    def forward(self, context, horizon):
        b = context.shape[0]
        zeros = context.new_zeros(b, args.hidden, args.side, args.side)
        states = [(zeros, zeros) for _ in self.cells]
        for t in range(context.shape[1]):
            out, states = self.step(context[:, t], states)
        outputs = []
        for _ in range(horizon):
            outputs.append(out)
            out, states = self.step(out, states)
        return torch.stack(outputs, 1)


torch.cuda.memory._record_memory_history(max_entries=args.max_entries)
torch.manual_seed(0)
model = Forecaster().cuda()
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
gen = torch.Generator().manual_seed(4)
try:
    for step in range(args.steps):
        context = int(torch.randint(args.min_context, args.max_context + 1, (1,), generator=gen))
        clip = torch.rand(args.batch, context + args.horizon, 1, args.side, args.side, generator=gen).cuda()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            pred = model(clip[:, :context], args.horizon)
        loss = F.mse_loss(pred.float(), clip[:, context:])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        print(f"step {step}: context {context} loss {loss.item():.4f}", flush=True)
        if (step + 1) % args.eval_every == 0:
            with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
                clip = torch.rand(args.eval_batch, args.max_context + 2 * args.horizon, 1, args.side, args.side,
                                  generator=gen).cuda()
                pred = model(clip[:, :args.max_context], 2 * args.horizon)
                err = F.mse_loss(pred.float(), clip[:, args.max_context:]).item()
            print(f"eval after {step}: mse {err:.4f}", flush=True)
except torch.OutOfMemoryError:
    torch.cuda.memory._dump_snapshot("oom_snapshot.pickle")
    raise
