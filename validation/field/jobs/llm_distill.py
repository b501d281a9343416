"""Distilling a causal LM into a smaller one, as DistilBERT/MiniLLM-style recipes and many blog posts write
the loop: a frozen bf16 teacher (eval(), torch.no_grad()) and an fp32 student under bf16 autocast; the loss is
alpha × T² × KL(student ‖ teacher) on the full-vocabulary soft targets at temperature T, computed in fp32,
plus (1 - alpha) × the student's cross-entropy on the tokens. A Llama-3-sized vocabulary (128,256), batches of
variable length (padded to the longest), AdamW. History from the start (a ring of --max-entries); the snapshot
is dumped in the except handler.
"""
import argparse, random
import torch, torch.nn.functional as F
from transformers import LlamaConfig, LlamaForCausalLM

p = argparse.ArgumentParser()
p.add_argument("--teacher-hidden", type=int, default=2048)
p.add_argument("--teacher-layers", type=int, default=12)
p.add_argument("--student-hidden", type=int, default=1024)
p.add_argument("--student-layers", type=int, default=8)
p.add_argument("--vocab", type=int, default=128256)
p.add_argument("--batch", type=int, default=4)
p.add_argument("--max-len", type=int, default=2048)
p.add_argument("--steps", type=int, default=14)
p.add_argument("--temperature", type=float, default=2.0)
p.add_argument("--alpha", type=float, default=0.5)
p.add_argument("--max-entries", type=int, default=100000)
args = p.parse_args()


def llama(hidden, layers):
    return LlamaForCausalLM(LlamaConfig(hidden_size=hidden, num_hidden_layers=layers,
                                        num_attention_heads=hidden // 128, num_key_value_heads=hidden // 256,
                                        intermediate_size=hidden * 8 // 3 // 64 * 64, vocab_size=args.vocab,
                                        max_position_embeddings=4096))


torch.cuda.memory._record_memory_history(max_entries=args.max_entries)
teacher = llama(args.teacher_hidden, args.teacher_layers).to("cuda", torch.bfloat16).eval()
teacher.requires_grad_(False)
student = llama(args.student_hidden, args.student_layers).cuda()
opt = torch.optim.AdamW(student.parameters(), lr=1e-4)
rng = random.Random(3)
t = args.temperature
try:
    for step in range(args.steps):
        n = max(64, min(args.max_len, int(rng.lognormvariate(6.6, 0.5))))
        ids = torch.randint(0, args.vocab, (args.batch, n), device="cuda")
        with torch.no_grad():
            teacher_logits = teacher(input_ids=ids).logits
        with torch.autocast("cuda", dtype=torch.bfloat16):
            out = student(input_ids=ids, labels=ids)
        soft = F.kl_div(F.log_softmax(out.logits.float() / t, dim=-1), F.softmax(teacher_logits.float() / t, dim=-1),
                        reduction="batchmean") * t * t
        loss = args.alpha * soft + (1 - args.alpha) * out.loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        print(f"step {step} len {n} loss {loss.item():.3f}", flush=True)
except torch.OutOfMemoryError:
    torch.cuda.memory._dump_snapshot("oom_snapshot.pickle")
    raise
