"""Whole-network CUDA graph capture as PyTorch's CUDA semantics notes teach it ("Whole-network capture"): three
warmup iterations on a side stream, then forward, backward and optimizer.step() captured once into a
torch.cuda.CUDAGraph and replayed every step after copying the batch into the static input and target. Every
--eval-every steps the model is evaluated eagerly under torch.no_grad() at a larger batch, outside the graph's
private memory pool. The model is a stack of pre-norm MLP blocks (fp32, Adam with capturable=True, as capture
needs). Random data (seeded). History from the start; the snapshot is dumped in the except handler.
"""
import argparse
import torch, torch.nn as nn

p = argparse.ArgumentParser()
p.add_argument("--batch", type=int, default=4096)
p.add_argument("--eval-batch", type=int, default=32768)
p.add_argument("--width", type=int, default=2048)
p.add_argument("--blocks", type=int, default=8)
p.add_argument("--steps", type=int, default=12)
p.add_argument("--eval-every", type=int, default=4)
p.add_argument("--max-entries", type=int, default=200000)
args = p.parse_args()


class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.fc1, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x):
        return x + self.fc2(torch.nn.functional.gelu(self.fc1(self.norm(x))))


torch.manual_seed(0)
D = args.width
model = nn.Sequential(*[Block(D) for _ in range(args.blocks)], nn.LayerNorm(D), nn.Linear(D, 10)).cuda()
loss_fn = nn.CrossEntropyLoss()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-4, capturable=True)
gen = torch.Generator().manual_seed(1)


def batch_of(n):
    return torch.randn(n, D, generator=gen), torch.randint(10, (n,), generator=gen)


torch.cuda.memory._record_memory_history(max_entries=args.max_entries)
try:
    static_input = torch.randn(args.batch, D, device="cuda")
    static_target = torch.randint(10, (args.batch,), device="cuda")
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for i in range(3):
            optimizer.zero_grad(set_to_none=True)
            loss_fn(model(static_input), static_target).backward()
            optimizer.step()
    torch.cuda.current_stream().wait_stream(s)

    g = torch.cuda.CUDAGraph()
    optimizer.zero_grad(set_to_none=True)
    with torch.cuda.graph(g):
        static_loss = loss_fn(model(static_input), static_target)
        static_loss.backward()
        optimizer.step()
    print("captured", flush=True)

    for step in range(args.steps):
        data, target = batch_of(args.batch)
        static_input.copy_(data)
        static_target.copy_(target)
        g.replay()
        print(f"step {step} loss {static_loss.item():.4f}", flush=True)
        if (step + 1) % args.eval_every == 0:
            model.eval()
            with torch.no_grad():
                x, y = (t.cuda() for t in batch_of(args.eval_batch))
                acc = (model(x).argmax(1) == y).float().mean().item()
            model.train()
            print(f"eval at step {step}: acc {acc:.4f}", flush=True)
except torch.OutOfMemoryError:
    torch.cuda.memory._dump_snapshot("oom_snapshot.pickle")
    raise
