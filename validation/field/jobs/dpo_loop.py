"""Direct Preference Optimization written as TRL's DPOTrainer computes it (concatenated_forward): a policy and a
frozen reference copy of a Qwen2 from config (random init: no download), each batch's chosen and rejected
completions padded to one length and run as one concatenated batch, per-token log-probabilities from the fp32
log-softmax of the logits gathered at the labels, summed over the completion, and the sigmoid loss at beta 0.1;
the reference under torch.no_grad(); bf16 autocast, AdamW, gradient clipping. Prompt and completion lengths vary
per batch. History from the start (--max-entries); the snapshot is dumped in the except handler.
"""
import argparse, copy, random
import torch, torch.nn.functional as F
from transformers import Qwen2Config, Qwen2ForCausalLM

p = argparse.ArgumentParser()
p.add_argument("--hidden", type=int, default=1024)
p.add_argument("--layers", type=int, default=12)
p.add_argument("--batch", type=int, default=4)
p.add_argument("--max-len", type=int, default=1024)
p.add_argument("--steps", type=int, default=10)
p.add_argument("--beta", type=float, default=0.1)
p.add_argument("--max-entries", type=int, default=100000)
args = p.parse_args()
vocab = 32000

torch.cuda.memory._record_memory_history(max_entries=args.max_entries)
policy = Qwen2ForCausalLM(Qwen2Config(hidden_size=args.hidden, num_hidden_layers=args.layers, num_attention_heads=16,
                                      num_key_value_heads=4, intermediate_size=4 * args.hidden, vocab_size=vocab,
                                      max_position_embeddings=4096)).cuda()
reference = copy.deepcopy(policy).eval().requires_grad_(False)
optimizer = torch.optim.AdamW(policy.parameters(), lr=5e-7)
rng = random.Random(0)


def batch():
    """prompt + chosen and prompt + rejected rows, padded to the longest; labels -100 on prompts and padding."""
    rows, masks = [], []
    for _ in range(args.batch):
        prompt = rng.randint(32, args.max_len // 2)
        for _ in range(2):
            completion = rng.randint(16, args.max_len - prompt)
            rows.append([rng.randrange(3, vocab) for _ in range(prompt + completion)])
            masks.append(prompt)
    n = max(len(r) for r in rows)
    ids = torch.zeros(len(rows), n, dtype=torch.long)
    attention = torch.zeros(len(rows), n, dtype=torch.long)
    labels = torch.full((len(rows), n), -100, dtype=torch.long)
    for i, r in enumerate(rows):
        ids[i, :len(r)] = torch.tensor(r)
        attention[i, :len(r)] = 1
        labels[i, masks[i]:len(r)] = ids[i, masks[i]:len(r)]
    # chosen rows first, then rejected, as concatenated_inputs orders them
    order = list(range(0, len(rows), 2)) + list(range(1, len(rows), 2))
    return ids[order].cuda(), attention[order].cuda(), labels[order].cuda()


def sequence_logps(model, ids, attention, labels):
    logits = model(input_ids=ids, attention_mask=attention).logits[:, :-1].float()
    labels = labels[:, 1:]
    mask = labels != -100
    per_token = torch.gather(logits.log_softmax(-1), 2, labels.clamp(min=0).unsqueeze(2)).squeeze(2)
    return (per_token * mask).sum(-1)


try:
    for step in range(args.steps):
        ids, attention, labels = batch()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logps = sequence_logps(policy, ids, attention, labels)
            with torch.no_grad():
                ref_logps = sequence_logps(reference, ids, attention, labels)
        chosen, rejected = logps.chunk(2)
        ref_chosen, ref_rejected = ref_logps.chunk(2)
        loss = -F.logsigmoid(args.beta * ((chosen - rejected) - (ref_chosen - ref_rejected))).mean()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(policy.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        print(f"step {step} tokens {ids.size(1)} loss {loss.item():.4f}", flush=True)
except torch.OutOfMemoryError:
    torch.cuda.memory._dump_snapshot("oom_snapshot.pickle")
    raise
