"""A GPT trained with Muon as the modded-nanoGPT speedrun and its followers set it up: Muon (momentum, then
Newton-Schulz orthogonalisation in bf16) for the 2-D weights of the blocks, AdamW for the embedding, the head
and the norms; a batch-size warm-up as GPT-3 and many pre-training recipes use it (the batch grows by one
sequence every --ramp-every steps from --batch-start to --batch-max); fixed sequence length, bf16 autocast.
torch.optim.Muon where PyTorch has it, else the speedrun's own loop written out. History from
--history-from-step (mid-run); the snapshot is dumped by the OOM observer.
"""
import argparse
import torch
from transformers import LlamaConfig, LlamaForCausalLM

p = argparse.ArgumentParser()
p.add_argument("--hidden", type=int, default=2048)
p.add_argument("--layers", type=int, default=12)
p.add_argument("--seq", type=int, default=1024)
p.add_argument("--batch-start", type=int, default=2)
p.add_argument("--batch-max", type=int, default=12)
p.add_argument("--ramp-every", type=int, default=1)
p.add_argument("--steps", type=int, default=14)
p.add_argument("--history-from-step", type=int, default=2)
p.add_argument("--max-entries", type=int, default=100000)
args = p.parse_args()


def orthogonalize(g, steps=5):
    # Newton-Schulz iteration to the nearest semi-orthogonal matrix, as the speedrun does it (bf16).
    a, b, c = 3.4445, -4.7750, 2.0315
    x = g.bfloat16()
    tall = x.size(0) > x.size(1)
    if tall:
        x = x.T
    x = x / (x.norm() + 1e-7)
    for _ in range(steps):
        s = x @ x.T
        x = a * x + (b * s + c * s @ s) @ x
    return x.T if tall else x


class SpeedrunMuon(torch.optim.Optimizer):
    def __init__(self, params, lr=0.02, momentum=0.95):
        super().__init__(params, dict(lr=lr, momentum=momentum))

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            for w in group["params"]:
                if w.grad is None:
                    continue
                state = self.state[w]
                if "momentum_buffer" not in state:
                    state["momentum_buffer"] = torch.zeros_like(w.grad)
                buf = state["momentum_buffer"]
                buf.lerp_(w.grad, 1 - group["momentum"])
                update = orthogonalize(w.grad.lerp(buf, group["momentum"]))
                w.add_(update.to(w.dtype), alpha=-group["lr"] * max(1, w.size(0) / w.size(1)) ** 0.5)


cfg = LlamaConfig(hidden_size=args.hidden, num_hidden_layers=args.layers, num_attention_heads=args.hidden // 128,
                  intermediate_size=args.hidden * 8 // 3 // 64 * 64, vocab_size=50304, max_position_embeddings=4096)
model = LlamaForCausalLM(cfg).cuda()
matrices = [w for n, w in model.model.layers.named_parameters() if w.ndim == 2]
others = [w for w in model.parameters() if w.ndim != 2 or all(w is not m for m in matrices)]
muon = torch.optim.Muon(matrices, lr=0.02, momentum=0.95) if hasattr(torch.optim, "Muon") else SpeedrunMuon(matrices)
adam = torch.optim.AdamW(others, lr=3e-4, betas=(0.9, 0.95), weight_decay=0.0)
print("muon:", type(muon).__module__, type(muon).__name__, flush=True)


def on_oom(device, alloc, device_alloc, device_free):
    torch.cuda.memory._dump_snapshot("oom_snapshot.pickle")


torch._C._cuda_attach_out_of_memory_observer(on_oom)
for step in range(args.steps):
    if step == args.history_from_step:
        torch.cuda.memory._record_memory_history(max_entries=args.max_entries)
    batch = min(args.batch_max, args.batch_start + step // args.ramp_every)
    ids = torch.randint(0, cfg.vocab_size, (batch, args.seq), device="cuda")
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = model(input_ids=ids, labels=ids).loss
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    muon.step()
    adam.step()
    model.zero_grad(set_to_none=True)
    print(f"step {step} batch {batch} loss {loss.item():.3f}", flush=True)
