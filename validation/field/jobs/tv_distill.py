"""Knowledge distillation of an image classifier (Hinton et al.), as PyTorch's "Knowledge Distillation
Tutorial" and torchvision's recipe combine it: a frozen teacher (--teacher, eval(), torch.no_grad()) and a
student (--student) trained on the soft targets at temperature T plus the hard labels, cudnn.benchmark,
channels_last, fp16 autocast with GradScaler, SGD with momentum, random-size batches (RandomResizedCrop to
one of --sizes per batch). History from the start (ring of --max-entries); the snapshot is dumped in the
except handler.
"""
import argparse, random
import torch, torch.nn.functional as F, torchvision

p = argparse.ArgumentParser()
p.add_argument("--teacher", default="resnet152")
p.add_argument("--student", default="resnet50")
p.add_argument("--batch", type=int, default=128)
p.add_argument("--steps", type=int, default=16)
p.add_argument("--sizes", default="176,224,256")
p.add_argument("--temperature", type=float, default=2.0)
p.add_argument("--max-entries", type=int, default=100000)
args = p.parse_args()

torch.backends.cudnn.benchmark = True
torch.cuda.memory._record_memory_history(max_entries=args.max_entries)
teacher = getattr(torchvision.models, args.teacher)().cuda().to(memory_format=torch.channels_last).eval()
student = getattr(torchvision.models, args.student)().cuda().to(memory_format=torch.channels_last)
optimizer = torch.optim.SGD(student.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
scaler = torch.amp.GradScaler("cuda")
sizes = [int(s) for s in args.sizes.split(",")]
rng = random.Random(0)
T = args.temperature
try:
    for step in range(args.steps):
        s = rng.choice(sizes)
        x = torch.randn(args.batch, 3, s, s, device="cuda").to(memory_format=torch.channels_last)
        y = torch.randint(0, 1000, (args.batch,), device="cuda")
        with torch.autocast("cuda", dtype=torch.float16):
            with torch.no_grad():
                teacher_logits = teacher(x)
            student_logits = student(x)
            soft = F.kl_div(F.log_softmax(student_logits / T, dim=-1), F.softmax(teacher_logits / T, dim=-1),
                            reduction="batchmean") * T * T
            loss = 0.25 * soft + 0.75 * F.cross_entropy(student_logits, y)
        optimizer.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        print(f"step {step} size {s} loss {loss.item():.3f}", flush=True)
except torch.OutOfMemoryError:
    torch.cuda.memory._dump_snapshot("oom_snapshot.pickle")
    raise
