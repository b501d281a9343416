"""Full-batch training with torch.optim.LBFGS as PyTorch's torch.optim docs show it ("Some optimization algorithms
such as Conjugate Gradient and LBFGS need to reevaluate the function multiple times, so you have to pass in a
closure"): optimizer.step(closure) each step, the closure zeroing the gradients, running the model and the loss,
calling backward and returning the loss. The model is pytorch/examples' MNIST Net (mnist/main.py: two 3x3
convolutions, max-pooling, fc1, fc2, log_softmax and nll_loss) with fc1 widened to --width (2048: 18.9M parameters)
and its dropout left out (LBFGS wants a closure that returns the same loss for the same weights), fitted to one
fixed batch of --samples random 28x28 images with random labels, as users fit a small data set whole with L-BFGS.
LBFGS(lr --lr, history_size --history-size, max_iter --max-iter iterations a step, line_search_fn None or
--line-search strong_wolfe): every iteration after the first appends y and s, two fp32 vectors of the flattened
parameters' size, to old_dirs and old_stps in the optimizer's state on the GPU until history_size pairs are held
(15 GB at the defaults), so the memory grows step after step for the first 25 steps, then the oldest pair is
dropped as each new one comes. fp32. History from the start (PyTorch's memory docs' call: a ring of --max-entries);
the snapshot is dumped in the except handler.
"""
import argparse
import torch, torch.nn as nn, torch.nn.functional as F

p = argparse.ArgumentParser()
p.add_argument("--width", type=int, default=2048, help="fc1's width (the example's: 128)")
p.add_argument("--samples", type=int, default=8192)
p.add_argument("--steps", type=int, default=30)
p.add_argument("--lr", type=float, default=1.0)
p.add_argument("--max-iter", type=int, default=4)
p.add_argument("--history-size", type=int, default=100)
p.add_argument("--line-search", default=None, choices=["strong_wolfe"], help="line_search_fn (default: None)")
p.add_argument("--max-entries", type=int, default=100000)
args = p.parse_args()

torch.cuda.memory._record_memory_history(max_entries=args.max_entries)


class Net(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 3, 1)
        self.conv2 = nn.Conv2d(32, 64, 3, 1)
        self.fc1 = nn.Linear(9216, width)
        self.fc2 = nn.Linear(width, 10)

    def forward(self, x):
        x = F.relu(self.conv1(x))
        x = F.relu(self.conv2(x))
        x = F.max_pool2d(x, 2)
        x = torch.flatten(x, 1)
        x = F.relu(self.fc1(x))
        return F.log_softmax(self.fc2(x), dim=1)


torch.manual_seed(0)
device = torch.device("cuda")
model = Net(args.width).to(device)
print(f"{sum(p_.numel() for p_ in model.parameters()) / 1e6:.1f}M parameters", flush=True)
gen = torch.Generator().manual_seed(1)
data = ((torch.rand(args.samples, 1, 28, 28, generator=gen) - 0.1307) / 0.3081).to(device)
target = torch.randint(0, 10, (args.samples,), generator=gen).to(device)
optimizer = torch.optim.LBFGS(model.parameters(), lr=args.lr, max_iter=args.max_iter,
                              history_size=args.history_size, line_search_fn=args.line_search)
evals = 0


def closure():
    global evals
    evals += 1
    optimizer.zero_grad()
    output = model(data)
    loss = F.nll_loss(output, target)
    loss.backward()
    return loss


model.train()
try:
    for step in range(args.steps):
        loss = optimizer.step(closure)
        state = optimizer.state[optimizer.param_groups[0]["params"][0]]  # LBFGS keeps its state on the first param
        print(f"step {step} loss {loss.item():.4f} evals {evals} history {len(state.get('old_dirs', []))} "
              f"allocated {torch.cuda.memory_allocated() / 2**30:.2f} GiB", flush=True)
except torch.OutOfMemoryError:
    torch.cuda.memory._dump_snapshot("oom_snapshot.pickle")
    raise
