"""A Mamba language model in a plain loop (transformers' MambaForCausalLM from config, random init: no download),
on its PyTorch path (no mamba-ssm kernels installed: the selective scan runs token by token), as the model card's
"train it yourself" loop: AdamW, bf16 autocast, gradient clipping, sequences of a random length each step.

History from step --history-from-step (a mid-run start, ring of --max-entries); the snapshot is dumped by the OOM
observer.
"""
import argparse, random
import torch
from transformers import MambaConfig, MambaForCausalLM

p = argparse.ArgumentParser()
p.add_argument("--hidden", type=int, default=768)
p.add_argument("--layers", type=int, default=8)
p.add_argument("--batch", type=int, default=16)
p.add_argument("--min-len", type=int, default=128)
p.add_argument("--max-len", type=int, default=384)
p.add_argument("--steps", type=int, default=10)
p.add_argument("--history-from-step", type=int, default=2)
p.add_argument("--max-entries", type=int, default=100000)
args = p.parse_args()


def oom_observer(device, alloc, device_alloc, device_free):
    torch.cuda.memory._dump_snapshot("oom_snapshot.pickle")


torch._C._cuda_attach_out_of_memory_observer(oom_observer)
model = MambaForCausalLM(MambaConfig(vocab_size=32000, hidden_size=args.hidden, num_hidden_layers=args.layers,
                                     state_size=16, use_cache=False)).cuda()
optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1)
rng = random.Random(0)
for step in range(args.steps):
    if step == args.history_from_step:
        torch.cuda.memory._record_memory_history(max_entries=args.max_entries)
    length = rng.randrange(args.min_len, args.max_len + 1)
    ids = torch.randint(0, 32000, (args.batch, length), device="cuda")
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = model(input_ids=ids, labels=ids).loss
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    print(f"step {step} len {length} loss {loss.item():.3f}", flush=True)
