"""Quantization-aware training of a ResNet-50 as torchvision's quantization reference (references/classification/
train_quantization.py) does it, with FX graph mode: `prepare_qat_fx` with the default QAT qconfig inserts fused
moving-average observers and fake quantizers on every activation and weight; SGD with momentum; the observers are
disabled and BatchNorm statistics frozen after --freeze-after steps, as the reference does after some epochs; an
evaluation under no_grad at --eval-batch every --eval-every steps. Random images and labels, cudnn.benchmark on.
History from the start; the snapshot is dumped in the except handler.
"""
import argparse
import torch, torch.nn.functional as F, torchvision
from torch.ao.quantization import get_default_qat_qconfig_mapping
from torch.ao.quantization.quantize_fx import prepare_qat_fx

p = argparse.ArgumentParser()
p.add_argument("--batch", type=int, default=96)
p.add_argument("--eval-batch", type=int, default=256)
p.add_argument("--size", type=int, default=224)
p.add_argument("--steps", type=int, default=12)
p.add_argument("--freeze-after", type=int, default=6)
p.add_argument("--eval-every", type=int, default=5)
p.add_argument("--max-entries", type=int, default=150000)
args = p.parse_args()

torch.backends.cudnn.benchmark = True
torch.cuda.memory._record_memory_history(max_entries=args.max_entries)
model = torchvision.models.resnet50(weights=None).train()
example = (torch.randn(1, 3, args.size, args.size),)
model = prepare_qat_fx(model, get_default_qat_qconfig_mapping("x86"), example).cuda()
optimizer = torch.optim.SGD(model.parameters(), lr=1e-4, momentum=0.9, weight_decay=1e-4)
images = torch.randn(4 * args.batch, 3, args.size, args.size)
labels = torch.randint(0, 1000, (4 * args.batch,))


def evaluate():
    model.eval()
    correct = 0
    with torch.no_grad():
        for i in range(0, len(images), args.eval_batch):
            x = images[i:i + args.eval_batch].cuda(non_blocking=True)
            correct += (model(x).argmax(1).cpu() == labels[i:i + args.eval_batch]).sum().item()
    model.train()
    return correct / len(images)


try:
    for step in range(args.steps):
        if step == args.freeze_after:
            model.apply(torch.ao.quantization.disable_observer)
            model.apply(torch.ao.nn.intrinsic.qat.freeze_bn_stats)
        i = (step % 4) * args.batch
        x, y = images[i:i + args.batch].cuda(non_blocking=True), labels[i:i + args.batch].cuda(non_blocking=True)
        loss = F.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        print(f"step {step}: loss {loss.item():.3f}", flush=True)
        if (step + 1) % args.eval_every == 0:
            print(f"step {step}: acc@1 {evaluate():.4f}", flush=True)
except torch.OutOfMemoryError:
    torch.cuda.memory._dump_snapshot("oom_snapshot.pickle")
    raise
