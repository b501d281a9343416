"""Padding-free causal-LM training with the HF Trainer, as the HF blog "Improving Hugging Face Training Efficiency
Through Packing with Flash Attention" sets it up: DataCollatorWithFlattening concatenates a batch's documents into
one row with position_ids restarting at each document (no padding; the tokens of a step vary with the documents
drawn), a Llama-architecture model from config (random init: no download) with SDPA attention, bf16,
adamw_torch_fused, no eval. Document lengths are log-normal, capped at --max-len. History from the start as a ring
of --max-entries; the snapshot is dumped in an except handler around trainer.train().
"""
import argparse, random
import torch
from transformers import DataCollatorWithFlattening, LlamaConfig, LlamaForCausalLM, Trainer, TrainingArguments

p = argparse.ArgumentParser()
p.add_argument("--hidden", type=int, default=1536)
p.add_argument("--layers", type=int, default=12)
p.add_argument("--batch", type=int, default=16, help="documents per step")
p.add_argument("--max-len", type=int, default=4096)
p.add_argument("--steps", type=int, default=16)
p.add_argument("--max-entries", type=int, default=100000)
args = p.parse_args()


class Documents(torch.utils.data.Dataset):
    def __init__(self, n, seed):
        rng = random.Random(seed)
        lengths = [max(32, min(args.max_len, int(rng.lognormvariate(6.6, 0.9)))) for _ in range(n)]
        self.rows = [{"input_ids": [rng.randrange(100, 32000) for _ in range(k)]} for k in lengths]

    def __len__(self):
        return len(self.rows)

    def __getitem__(self, i):
        return self.rows[i]


cfg = LlamaConfig(hidden_size=args.hidden, num_hidden_layers=args.layers, num_attention_heads=args.hidden // 128,
                  num_key_value_heads=args.hidden // 512, intermediate_size=args.hidden * 8 // 3,
                  vocab_size=32000, max_position_embeddings=args.max_len, attn_implementation="sdpa")
model = LlamaForCausalLM(cfg)
torch.cuda.memory._record_memory_history(max_entries=args.max_entries)
targs = TrainingArguments(output_dir="hf_out", per_device_train_batch_size=args.batch, max_steps=args.steps,
                          bf16=True, optim="adamw_torch_fused", save_strategy="no", report_to=[], logging_steps=4,
                          dataloader_num_workers=0, seed=0)
trainer = Trainer(model=model, args=targs, train_dataset=Documents(args.steps * args.batch, 1),
                  data_collator=DataCollatorWithFlattening())
try:
    trainer.train()
except torch.OutOfMemoryError:
    torch.cuda.memory._dump_snapshot("oom_snapshot.pickle")
    raise
