"""Training with HF Accelerate as its README shows: Accelerator(mixed_precision="bf16"), gradient
accumulation through accelerator.accumulate, a DataLoader of variable-length batches padded per batch.
History from the start; the snapshot is dumped by the OOM observer.
"""
import argparse, random
import torch
from accelerate import Accelerator
from transformers import LlamaConfig, LlamaForCausalLM

p = argparse.ArgumentParser()
p.add_argument("--hidden", type=int, default=1536)
p.add_argument("--layers", type=int, default=16)
p.add_argument("--batch", type=int, default=4)
p.add_argument("--ga", type=int, default=2)
p.add_argument("--steps", type=int, default=24)
p.add_argument("--max-len", type=int, default=3072)
p.add_argument("--max-entries", type=int, default=200000)
args = p.parse_args()

torch.cuda.memory._record_memory_history(max_entries=args.max_entries)
torch._C._cuda_attach_out_of_memory_observer(
    lambda device, alloc, device_alloc, device_free: torch.cuda.memory._dump_snapshot("oom_snapshot.pickle"))
rng = random.Random(5)
rows = [torch.randint(0, 32000, (max(64, min(args.max_len, int(rng.lognormvariate(6.8, 0.7)))),))
        for _ in range(args.steps * args.batch)]


def collate(batch):
    return torch.nn.utils.rnn.pad_sequence(batch, batch_first=True)


accelerator = Accelerator(mixed_precision="bf16", gradient_accumulation_steps=args.ga)
cfg = LlamaConfig(hidden_size=args.hidden, num_hidden_layers=args.layers, num_attention_heads=args.hidden // 128,
                  intermediate_size=args.hidden * 8 // 3 // 64 * 64, vocab_size=32000, max_position_embeddings=8192)
model = LlamaForCausalLM(cfg)
opt = torch.optim.AdamW(model.parameters(), lr=2e-4)
loader = torch.utils.data.DataLoader(rows, batch_size=args.batch, collate_fn=collate)
model, opt, loader = accelerator.prepare(model, opt, loader)
model.train()
for step, ids in enumerate(loader):
    with accelerator.accumulate(model):
        loss = model(input_ids=ids, labels=ids).loss
        accelerator.backward(loss)
        opt.step()
        opt.zero_grad()
    if step % 4 == 0:
        accelerator.print(f"step {step} len {ids.shape[1]} loss {loss.item():.3f}")
