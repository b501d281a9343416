"""A Mixtral-style mixture of experts pretrained in a plain loop, as the Hugging Face model card and the
course's "Training a causal language model from scratch" write it: MixtralForCausalLM from config (random
init: no download; top-2 routing over --experts experts, the router's load-balancing loss added through
output_router_logits=True), batches padded to their longest row (lengths vary), bf16 autocast, AdamW,
gradient clipping, a cosine schedule. How many tokens each expert gets changes every step. History from
the start; the snapshot is dumped by the OOM observer.
"""
import argparse, random
import torch
from transformers import MixtralConfig, MixtralForCausalLM, get_cosine_schedule_with_warmup

p = argparse.ArgumentParser()
p.add_argument("--hidden", type=int, default=1024)
p.add_argument("--layers", type=int, default=8)
p.add_argument("--experts", type=int, default=8)
p.add_argument("--batch", type=int, default=8)
p.add_argument("--max-len", type=int, default=1024)
p.add_argument("--steps", type=int, default=12)
p.add_argument("--max-entries", type=int, default=100000)
args = p.parse_args()

torch.cuda.memory._record_memory_history(max_entries=args.max_entries)


def oom_observer(device, alloc, device_alloc, device_free):
    torch.cuda.memory._dump_snapshot("oom_snapshot.pickle")


torch._C._cuda_attach_out_of_memory_observer(oom_observer)
config = MixtralConfig(vocab_size=32000, hidden_size=args.hidden, intermediate_size=2 * args.hidden,
                       num_hidden_layers=args.layers, num_attention_heads=16, num_key_value_heads=4,
                       num_local_experts=args.experts, num_experts_per_tok=2, max_position_embeddings=4096,
                       output_router_logits=True, router_aux_loss_coef=0.02)
model = MixtralForCausalLM(config).cuda()
model.train()
optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1)
scheduler = get_cosine_schedule_with_warmup(optimizer, num_warmup_steps=2, num_training_steps=args.steps)
rng = random.Random(0)
for step in range(args.steps):
    lengths = [rng.randint(args.max_len // 4, args.max_len) for _ in range(args.batch)]
    n = max(lengths)
    ids = torch.randint(3, 32000, (args.batch, n))
    mask = torch.zeros(args.batch, n, dtype=torch.long)
    for i, k in enumerate(lengths):
        mask[i, :k] = 1
    labels = ids.masked_fill(mask == 0, -100)
    ids, mask, labels = ids.cuda(), mask.cuda(), labels.cuda()
    with torch.autocast("cuda", dtype=torch.bfloat16):
        out = model(input_ids=ids, attention_mask=mask, labels=labels)
    out.loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    scheduler.step()
    optimizer.zero_grad()
    print(f"step {step} tokens {n} loss {out.loss.item():.3f} aux {out.aux_loss.item():.3f}", flush=True)
