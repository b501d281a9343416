"""GRPO fine-tuning (Group Relative Policy Optimization, DeepSeekMath: Shao et al. 2024, arXiv:2402.03300) written
out by hand with HF transformers the way TRL's GRPOTrainer runs it (trl/trainer/grpo_trainer.py:
_generate_and_score_completions, _get_per_token_logps, selective_log_softmax, compute_loss), as users copy it into
their own loops. A policy LlamaForCausalLM from config (random init: no download; --hidden 2048, --layers 16, 16
heads, intermediate 5504, vocab 32000: 0.94B parameters) in bf16 on the GPU, a frozen reference that is a deepcopy of
it (eval, requires_grad False), AdamW (foreach, the default) at lr 1e-6. Each step: --prompts (16) prompts of random
token ids, each of a random length between --min-prompt and --max-prompt (64-256), left-padded with an
attention_mask as HF pads for decoder-only generation; policy.eval() and, under no_grad, policy.generate(do_sample,
temperature 1.0, top_k 50, num_return_sequences --group (16), KV cache: a DynamicCache grown token by token) with
max_new_tokens drawn at random each step between --min-new-tokens and --max-new-tokens (64-192, so the completions'
length changes step to step), completions masked after the first EOS as TRL does; a synthetic reward from the
completion tokens, advantages normalised within each group; the reference's per-token log-probs under no_grad, then
policy.train() with gradient checkpointing (use_cache=False) and, for each of --micro-batches (2) chunks of the
--prompts x --group completions (gradient accumulation), the policy's per-token log-probs (logits_to_keep, logits
upcast to fp32, gather minus logsumexp), the clipped GRPO loss with the k3 KL estimate at --beta 0.04, backward;
then clip_grad_norm_ 1.0, optimizer.step(), zero_grad(set_to_none=True). At the defaults the peak (about 22 GB
allocated) is the generation's KV cache of the longest step. Random: prompt lengths, prompt tokens, max_new_tokens
per step (Python and torch generators seeded by --seed), the sampled completions (CUDA RNG seeded). bf16 weights,
no autocast. History from the start (a ring of --max-entries); the snapshot is dumped in the except handler around
the training loop.
"""
import argparse, copy, random
import torch
from transformers import LlamaConfig, LlamaForCausalLM

p = argparse.ArgumentParser()
p.add_argument("--hidden", type=int, default=2048)
p.add_argument("--layers", type=int, default=16)
p.add_argument("--intermediate", type=int, default=5504)
p.add_argument("--vocab", type=int, default=32000)
p.add_argument("--prompts", type=int, default=16, help="prompts per step")
p.add_argument("--group", type=int, default=16, help="completions per prompt (num_generations)")
p.add_argument("--min-prompt", type=int, default=64)
p.add_argument("--max-prompt", type=int, default=256)
p.add_argument("--min-new-tokens", type=int, default=64, help="lower end of the per-step max_new_tokens draw")
p.add_argument("--max-new-tokens", type=int, default=192)
p.add_argument("--micro-batches", type=int, default=2, help="chunks of the completions for the loss (accumulation)")
p.add_argument("--steps", type=int, default=6)
p.add_argument("--beta", type=float, default=0.04)
p.add_argument("--epsilon", type=float, default=0.2)
p.add_argument("--lr", type=float, default=1e-6)
p.add_argument("--seed", type=int, default=0)
p.add_argument("--max-entries", type=int, default=200000)
args = p.parse_args()

torch.cuda.memory._record_memory_history(max_entries=args.max_entries)
PAD, BOS, EOS = 0, 1, 2
torch.manual_seed(args.seed)
rng = random.Random(args.seed)
gen = torch.Generator().manual_seed(args.seed + 1)
device = torch.device("cuda")
config = LlamaConfig(vocab_size=args.vocab, hidden_size=args.hidden, intermediate_size=args.intermediate,
                     num_hidden_layers=args.layers, num_attention_heads=16, num_key_value_heads=16,
                     max_position_embeddings=4096, pad_token_id=PAD, bos_token_id=BOS, eos_token_id=EOS)
with device:  # initialised on the GPU (a CPU init of 0.94B parameters takes ~10 s), then cast as from_pretrained would
    policy = LlamaForCausalLM(config).to(dtype=torch.bfloat16)
reference = copy.deepcopy(policy).eval().requires_grad_(False)
policy.config.use_cache = False
policy.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
optimizer = torch.optim.AdamW(policy.parameters(), lr=args.lr)
print(f"{sum(p_.numel() for p_ in policy.parameters()) / 1e9:.2f}B parameters", flush=True)


def prompt_batch():
    """--prompts rows of random ids, left-padded to the longest, as a tokenizer with padding_side='left' gives."""
    lengths = [rng.randint(args.min_prompt, args.max_prompt) for _ in range(args.prompts)]
    ids = torch.full((args.prompts, max(lengths)), PAD, dtype=torch.long)
    mask = torch.zeros_like(ids)
    for i, n in enumerate(lengths):
        ids[i, -n:] = torch.randint(3, args.vocab, (n,), generator=gen)
        ids[i, -n] = BOS
        mask[i, -n:] = 1
    return ids.to(device), mask.to(device)


def selective_log_softmax(logits, index):
    """TRL's fp32 path: the label's logit minus each row's logsumexp (no full log-softmax tensor)."""
    selected = torch.gather(logits, dim=-1, index=index.unsqueeze(-1)).squeeze(-1)
    return selected - torch.stack([torch.logsumexp(row, dim=-1) for row in logits])


def per_token_logps(model, ids, mask, n_completion):
    logits = model(input_ids=ids, attention_mask=mask, logits_to_keep=n_completion + 1, use_cache=False).logits
    logits = logits[:, :-1, :].float()  # temperature 1.0
    return selective_log_softmax(logits, ids[:, -n_completion:])


def rewards_of(completion_ids, completion_mask):
    """A stand-in reward function: the share of completion tokens in a 'format' set, plus a length bonus."""
    hits = ((completion_ids % 7 == 0).float() * completion_mask).sum(1)
    length = completion_mask.sum(1)
    return hits / length.clamp(min=1) + 0.001 * length


try:
    for step in range(args.steps):
        prompt_ids, prompt_mask = prompt_batch()
        new_tokens = rng.randint(args.min_new_tokens, args.max_new_tokens)
        policy.eval()
        with torch.no_grad():
            out = policy.generate(prompt_ids, attention_mask=prompt_mask, do_sample=True, temperature=1.0, top_k=50,
                                  max_new_tokens=new_tokens, num_return_sequences=args.group, pad_token_id=PAD,
                                  eos_token_id=EOS, use_cache=True)
        prompt_len = prompt_ids.size(1)
        completion_ids = out[:, prompt_len:]
        # mask everything after the first EOS, as _generate_and_score_completions does
        is_eos = completion_ids == EOS
        eos_idx = torch.full((is_eos.size(0),), is_eos.size(1), dtype=torch.long, device=device)
        eos_idx[is_eos.any(dim=1)] = is_eos.int().argmax(dim=1)[is_eos.any(dim=1)]
        positions = torch.arange(is_eos.size(1), device=device).expand(is_eos.size(0), -1)
        completion_mask = (positions <= eos_idx.unsqueeze(1)).int()
        attention_mask = torch.cat([prompt_mask.repeat_interleave(args.group, dim=0), completion_mask], dim=1)
        n_completion = completion_ids.size(1)

        rewards = rewards_of(completion_ids, completion_mask)
        grouped = rewards.view(-1, args.group)
        mean = grouped.mean(dim=1).repeat_interleave(args.group)
        std = grouped.std(dim=1).repeat_interleave(args.group)
        advantages = (rewards - mean) / (std + 1e-4)

        with torch.no_grad():
            ref_logps = torch.cat([per_token_logps(reference, ids, mask, n_completion) for ids, mask in
                                   zip(out.chunk(args.micro_batches), attention_mask.chunk(args.micro_batches))])

        policy.train()
        total = 0.0
        chunks = list(zip(*(t.chunk(args.micro_batches) for t in (out, attention_mask, ref_logps,
                                                                    advantages.unsqueeze(1), completion_mask))))
        for ids, mask, ref, adv, cmask in chunks:
            logps = per_token_logps(policy, ids, mask, n_completion)
            per_token_kl = torch.exp(ref - logps) - (ref - logps) - 1
            coef_1 = torch.exp(logps - logps.detach())  # one update per generation: old logps = current, detached
            coef_2 = torch.clamp(coef_1, 1 - args.epsilon, 1 + args.epsilon)
            per_token_loss = -torch.min(coef_1 * adv, coef_2 * adv) + args.beta * per_token_kl
            loss = ((per_token_loss * cmask).sum(-1) / cmask.sum(-1).clamp(min=1.0)).mean()
            (loss / len(chunks)).backward()
            total += loss.item() / len(chunks)
        torch.nn.utils.clip_grad_norm_(policy.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        print(f"step {step} prompts {args.prompts}x{prompt_len} completions {out.size(0)}x{n_completion} "
              f"(mean {completion_mask.sum(1).float().mean().item():.0f}) loss {total:.3e} "
              f"reward {rewards.mean().item():.3f} allocated {torch.cuda.memory_allocated() / 2**30:.2f} GiB",
              flush=True)
except torch.OutOfMemoryError:
    torch.cuda.memory._dump_snapshot("oom_snapshot.pickle")
    raise
