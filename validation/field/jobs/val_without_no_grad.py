"""The classic validation leak of the PyTorch forums: an image classifier's training loop in the style of the
transfer-learning tutorial, whose validate() forgets `torch.no_grad()` and sums the loss as a tensor
(`val_loss += criterion(outputs, labels)`): every validation batch's autograd graph, with all the activations its
forward saved for a backward that never comes, stays alive through the running sum until the epoch's end.
torchvision's ResNet-50, fp32, SGD with momentum, cudnn.benchmark; --steps training steps, then validation over
--val-batches batches. History from the start; the snapshot is dumped in the except handler.
"""
import argparse
import torch, torch.nn as nn, torchvision

p = argparse.ArgumentParser()
p.add_argument("--batch", type=int, default=64)
p.add_argument("--val-batch", type=int, default=32)
p.add_argument("--val-batches", type=int, default=10)
p.add_argument("--size", type=int, default=224)
p.add_argument("--steps", type=int, default=4)
p.add_argument("--max-entries", type=int, default=200000)
args = p.parse_args()

torch.backends.cudnn.benchmark = True
device = torch.device("cuda")
model = torchvision.models.resnet50(num_classes=100).to(device)
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.SGD(model.parameters(), lr=0.001, momentum=0.9)
gen = torch.Generator().manual_seed(0)


def batch_of(n):
    return torch.rand(n, 3, args.size, args.size, generator=gen), torch.randint(100, (n,), generator=gen)


def validate():
    model.eval()
    val_loss, correct = 0.0, 0
    for _ in range(args.val_batches):
        inputs, labels = (t.to(device) for t in batch_of(args.val_batch))
        outputs = model(inputs)
        val_loss += criterion(outputs, labels)
        correct += (outputs.argmax(1) == labels).sum()
    seen = args.val_batches * args.val_batch
    print(f"val loss {val_loss.item() / args.val_batches:.3f} acc {correct.item() / seen:.3f}")


torch.cuda.memory._record_memory_history(max_entries=args.max_entries)
try:
    model.train()
    for step in range(args.steps):
        inputs, labels = (t.to(device) for t in batch_of(args.batch))
        optimizer.zero_grad()
        loss = criterion(model(inputs), labels)
        loss.backward()
        optimizer.step()
        print(f"step {step} loss {loss.item():.3f}", flush=True)
    validate()
except torch.OutOfMemoryError:
    torch.cuda.memory._dump_snapshot("oom_snapshot.pickle")
    raise
