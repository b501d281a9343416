"""Optical-flow training as torchvision's optical-flow reference (references/optical_flow/train.py) does it: RAFT
(raft_large, random init: no download), image pairs cropped to --crop, the sequence loss over every refinement
iteration (gamma 0.8, flows over 400 px masked), AdamW with a OneCycle schedule, gradient clipping at 1.0. Random
image pairs and flows. History from the start; the snapshot is dumped in an except handler around the loop.
"""
import argparse
import torch, torchvision

p = argparse.ArgumentParser()
p.add_argument("--batch", type=int, default=6)
p.add_argument("--crop", default="368,496")
p.add_argument("--iters", type=int, default=12, help="RAFT's refinement iterations (num_flow_updates)")
p.add_argument("--steps", type=int, default=10)
p.add_argument("--max-entries", type=int, default=100000)
args = p.parse_args()
h, w = (int(x) for x in args.crop.split(","))


def sequence_loss(flow_preds, flow_gt, valid_flow_mask, gamma=0.8, max_flow=400):
    flow_norm = torch.sum(flow_gt ** 2, dim=1).sqrt()
    valid_flow_mask = valid_flow_mask & (flow_norm < max_flow)
    valid_flow_mask = valid_flow_mask[:, None, :, :]
    flow_preds = torch.stack(flow_preds)
    abs_diff = (flow_preds - flow_gt).abs()
    abs_diff = (abs_diff * valid_flow_mask).mean(axis=(1, 2, 3, 4))
    num_predictions = flow_preds.shape[0]
    weights = gamma ** torch.arange(num_predictions - 1, -1, -1).to(flow_gt.device)
    return (abs_diff * weights).sum()


torch.cuda.memory._record_memory_history(max_entries=args.max_entries)
model = torchvision.models.optical_flow.raft_large(weights=None).cuda().train()
optimizer = torch.optim.AdamW(model.parameters(), lr=4e-4, weight_decay=1e-4, eps=1e-8)
scheduler = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=4e-4, total_steps=args.steps + 100,
                                                pct_start=0.05, cycle_momentum=False, anneal_strategy="linear")
try:
    for step in range(args.steps):
        image1 = torch.rand(args.batch, 3, h, w, device="cuda") * 2 - 1
        image2 = torch.rand(args.batch, 3, h, w, device="cuda") * 2 - 1
        flow_gt = torch.randn(args.batch, 2, h, w, device="cuda") * 10
        valid = torch.rand(args.batch, h, w, device="cuda") > 0.1
        flow_predictions = model(image1, image2, num_flow_updates=args.iters)
        loss = sequence_loss(flow_predictions, flow_gt, valid)
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1)
        optimizer.step()
        scheduler.step()
        print(f"step {step} loss {loss.item():.3f}", flush=True)
except torch.OutOfMemoryError:
    torch.cuda.memory._dump_snapshot("oom_snapshot.pickle")
    raise
