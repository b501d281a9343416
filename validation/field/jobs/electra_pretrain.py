"""ELECTRA pre-training as its paper and the HF examples describe it: a small masked-LM generator
(ElectraForMaskedLM) and the discriminator (ElectraForPreTraining, base sizes) sharing nothing but the vocabulary;
15% of the tokens masked, replacements sampled from the generator's softmax at the masked positions, the
discriminator told which tokens were replaced; loss = MLM + 50 × replaced-token detection. Documents of random
lengths padded to each batch's longest, bf16 autocast, one AdamW over both models, linear warmup. Random init (no
download), random tokens. History from step --history-from (a user who turns it on mid-run); the snapshot is dumped
in the except handler.
"""
import argparse
import torch
from transformers import ElectraConfig, ElectraForMaskedLM, ElectraForPreTraining

p = argparse.ArgumentParser()
p.add_argument("--batch", type=int, default=64)
p.add_argument("--max-len", type=int, default=512)
p.add_argument("--steps", type=int, default=14)
p.add_argument("--history-from", type=int, default=2)
p.add_argument("--max-entries", type=int, default=100000)
args = p.parse_args()

vocab = 30522
common = dict(vocab_size=vocab, embedding_size=768, max_position_embeddings=args.max_len)
generator = ElectraForMaskedLM(ElectraConfig(hidden_size=256, num_hidden_layers=12, num_attention_heads=4,
                                             intermediate_size=1024, **common)).cuda()
discriminator = ElectraForPreTraining(ElectraConfig(hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
                                                    intermediate_size=3072, **common)).cuda()
params = list(generator.parameters()) + list(discriminator.parameters())
opt = torch.optim.AdamW(params, lr=2e-4, weight_decay=0.01)
sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / 10))
gen = torch.Generator().manual_seed(3)


def batch_of(n):
    lengths = torch.randint(128, args.max_len + 1, (n,), generator=gen)
    width = int(lengths.max())
    ids = torch.randint(5, vocab, (n, width), generator=gen)
    attention = (torch.arange(width)[None] < lengths[:, None]).long()
    ids[attention == 0] = 0
    return ids.cuda(), attention.cuda()


try:
    for step in range(args.steps):
        if step == args.history_from:
            torch.cuda.memory._record_memory_history(max_entries=args.max_entries)
        ids, attention = batch_of(args.batch)
        masked = (torch.rand(ids.shape, device="cuda") < 0.15) & (attention == 1)
        gen_input = ids.masked_fill(masked, 4)
        labels = ids.masked_fill(~masked, -100)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            gen_out = generator(input_ids=gen_input, attention_mask=attention, labels=labels)
            with torch.no_grad():
                probs = gen_out.logits[masked].float().softmax(-1)
                sampled = torch.multinomial(probs, 1).squeeze(-1)
            disc_input = ids.clone()
            disc_input[masked] = sampled
            replaced = (disc_input != ids).float()
            disc_out = discriminator(input_ids=disc_input, attention_mask=attention, labels=replaced)
            loss = gen_out.loss + 50.0 * disc_out.loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        sched.step()
        print(f"step {step}: width {ids.shape[1]} loss {loss.item():.3f}", flush=True)
except torch.OutOfMemoryError:
    torch.cuda.memory._dump_snapshot("oom_snapshot.pickle")
    raise
