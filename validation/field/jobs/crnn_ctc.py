"""Text-line recognition with a CRNN (Shi et al.), as OCR repositories train it: a VGG-style convolutional stack
that collapses the height of 32-pixel text lines, a 2-layer bidirectional LSTM (cuDNN) over the width, CTC loss
(torch.nn.CTCLoss, cuDNN's when it applies) over --classes symbols, Adam, fp32. Lines are batched by similar width
as such loaders bucket them; the width, and with it the sequence length, changes from batch to batch. Random
images and transcripts. History from the start; the snapshot is dumped in the except handler.
"""
import argparse, random
import torch, torch.nn as nn, torch.nn.functional as F

p = argparse.ArgumentParser()
p.add_argument("--batch", type=int, default=256)
p.add_argument("--hidden", type=int, default=512)
p.add_argument("--classes", type=int, default=6000)
p.add_argument("--min-width", type=int, default=256)
p.add_argument("--max-width", type=int, default=1600)
p.add_argument("--steps", type=int, default=20)
p.add_argument("--max-entries", type=int, default=100000)
args = p.parse_args()


def block(a, b, pool):
    return [nn.Conv2d(a, b, 3, 1, 1), nn.BatchNorm2d(b), nn.ReLU(inplace=True)] + ([nn.MaxPool2d(pool)] if pool else [])


class CRNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.cnn = nn.Sequential(*block(1, 64, 2), *block(64, 128, 2), *block(128, 256, None),
                                 *block(256, 256, (2, 1)), *block(256, 512, None), *block(512, 512, (2, 1)),
                                 *block(512, 512, (2, 1)))
        self.rnn = nn.LSTM(512, args.hidden, num_layers=2, bidirectional=True)
        self.fc = nn.Linear(2 * args.hidden, args.classes + 1)

    def forward(self, x):
        f = self.cnn(x).squeeze(2).permute(2, 0, 1)  # width/4 x batch x 512
        return self.fc(self.rnn(f)[0]).log_softmax(2)


torch.cuda.memory._record_memory_history(max_entries=args.max_entries)
model = CRNN().cuda()
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
ctc = nn.CTCLoss(blank=args.classes, zero_infinity=True)
rng = random.Random(5)
try:
    for step in range(args.steps):
        width = rng.randrange(args.min_width, args.max_width, 32)
        images = torch.rand(args.batch, 1, 32, width, device="cuda")
        target_lengths = torch.randint(width // 64, width // 16, (args.batch,), dtype=torch.long)
        targets = torch.randint(0, args.classes, (int(target_lengths.sum()),), dtype=torch.long)
        log_probs = model(images)
        input_lengths = torch.full((args.batch,), log_probs.shape[0], dtype=torch.long)
        loss = ctc(log_probs, targets, input_lengths, target_lengths)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 5)
        opt.step()
        if step % 5 == 0:
            print(f"step {step}: width {width} loss {loss.item():.3f}", flush=True)
except torch.OutOfMemoryError:
    torch.cuda.memory._dump_snapshot("oom_snapshot.pickle")
    raise
