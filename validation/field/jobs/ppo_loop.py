"""PPO-style RLHF as TRL's PPOTrainer and the "RLHF from scratch" tutorials run it, in a plain loop: a policy with a
value head and a frozen reference (Qwen2 from config, random init: no download), prompts of a random length each
step; a rollout generates --gen-len tokens with model.generate (KV cache, sampling) under no_grad, the reference
scores the responses' log-probs, and the policy takes a clipped-surrogate step with a KL penalty and a value loss
(bf16 autocast, fp32 log-softmax, AdamW). History from the start; the snapshot is dumped in the except handler.
"""
import argparse, copy, random
import torch, torch.nn.functional as F
from transformers import Qwen2Config, Qwen2ForCausalLM

p = argparse.ArgumentParser()
p.add_argument("--hidden", type=int, default=1024)
p.add_argument("--layers", type=int, default=12)
p.add_argument("--vocab", type=int, default=32000)
p.add_argument("--batch", type=int, default=16)
p.add_argument("--min-prompt", type=int, default=64)
p.add_argument("--max-prompt", type=int, default=512)
p.add_argument("--gen-len", type=int, default=128)
p.add_argument("--steps", type=int, default=8)
args = p.parse_args()

rng = random.Random(0)
config = Qwen2Config(vocab_size=args.vocab, hidden_size=args.hidden, intermediate_size=4 * args.hidden,
                     num_hidden_layers=args.layers, num_attention_heads=args.hidden // 64,
                     num_key_value_heads=args.hidden // 128, max_position_embeddings=4096, pad_token_id=0,
                     eos_token_id=1, bos_token_id=2)
policy = Qwen2ForCausalLM(config).cuda()
reference = copy.deepcopy(policy).eval().requires_grad_(False)
value_head = torch.nn.Linear(args.hidden, 1).cuda()
optimizer = torch.optim.AdamW(list(policy.parameters()) + list(value_head.parameters()), lr=1e-5)
torch.cuda.memory._record_memory_history(max_entries=100000)


def response_logprobs(logits, responses):
    return torch.gather(F.log_softmax(logits.float(), dim=-1), 2, responses.unsqueeze(-1)).squeeze(-1)


try:
    for step in range(args.steps):
        prompt_len = rng.randint(args.min_prompt, args.max_prompt)
        prompts = torch.randint(3, args.vocab, (args.batch, prompt_len), device="cuda")
        with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
            policy.eval()
            sequences = policy.generate(prompts, attention_mask=torch.ones_like(prompts), do_sample=True,
                                        max_new_tokens=args.gen_len, min_new_tokens=args.gen_len, pad_token_id=0)
            policy.train()
            responses = sequences[:, prompt_len:]
            reference_logp = response_logprobs(reference(sequences).logits[:, prompt_len - 1:-1], responses)
            scores = torch.randn(args.batch, device="cuda")  # the reward model's scores
        with torch.autocast("cuda", dtype=torch.bfloat16):
            out = policy(sequences, output_hidden_states=True)
            logp = response_logprobs(out.logits[:, prompt_len - 1:-1], responses)
            values = value_head(out.hidden_states[-1][:, prompt_len - 1:-1]).float().squeeze(-1)
        rewards = -0.05 * (logp.detach() - reference_logp)
        rewards[:, -1] += scores
        returns = rewards.flip(1).cumsum(1).flip(1)
        advantages = returns - values.detach()
        ratio = torch.exp(logp - logp.detach())
        policy_loss = -torch.min(ratio * advantages, ratio.clamp(0.8, 1.2) * advantages).mean()
        loss = policy_loss + 0.1 * F.mse_loss(values, returns)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        print(f"step {step} prompt {prompt_len} loss {loss.item():.4f}", flush=True)
except torch.OutOfMemoryError:
    torch.cuda.memory._dump_snapshot("oom_snapshot.pickle")
    raise
