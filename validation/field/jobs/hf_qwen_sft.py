"""Supervised fine-tuning of a Qwen2-architecture causal LM with the HF Trainer, as SFT scripts without TRL write it
(random init from the config: no download): prompt and response token ids with the prompt's labels set to -100,
padded per batch, a 151,936-token vocabulary (Qwen's: the logits dominate), gradient checkpointing, bf16,
adamw_torch_fused, torch_empty_cache_steps, an eval every --eval-steps at a larger batch. History from the start as
a ring of --max-entries; the snapshot is dumped by the OOM observer.
"""
import argparse, random
import torch
from transformers import Qwen2Config, Qwen2ForCausalLM, Trainer, TrainingArguments

p = argparse.ArgumentParser()
p.add_argument("--hidden", type=int, default=1024)
p.add_argument("--layers", type=int, default=16)
p.add_argument("--batch", type=int, default=8)
p.add_argument("--eval-batch", type=int, default=16)
p.add_argument("--max-len", type=int, default=2048)
p.add_argument("--steps", type=int, default=14)
p.add_argument("--eval-steps", type=int, default=5)
p.add_argument("--max-entries", type=int, default=100000)
args = p.parse_args()

torch._C._cuda_attach_out_of_memory_observer(
    lambda device, alloc, device_alloc, device_free: torch.cuda.memory._dump_snapshot("oom_snapshot.pickle"))


class Conversations(torch.utils.data.Dataset):
    def __init__(self, n, seed):
        rng = random.Random(seed)
        self.rows = []
        for _ in range(n):
            prompt = rng.randrange(32, 512)
            response = max(16, min(args.max_len - prompt, int(rng.lognormvariate(6.2, 0.8))))
            self.rows.append(([rng.randrange(100, 150000) for _ in range(prompt + response)], prompt))

    def __len__(self):
        return len(self.rows)

    def __getitem__(self, i):
        return self.rows[i]


def collate(rows):
    n = max(len(ids) for ids, _ in rows)
    ids = torch.full((len(rows), n), 151643, dtype=torch.long)
    labels = torch.full((len(rows), n), -100, dtype=torch.long)
    mask = torch.zeros(len(rows), n, dtype=torch.long)
    for i, (seq, prompt) in enumerate(rows):
        ids[i, :len(seq)] = torch.tensor(seq)
        labels[i, prompt:len(seq)] = torch.tensor(seq[prompt:])
        mask[i, :len(seq)] = 1
    return {"input_ids": ids, "attention_mask": mask, "labels": labels}


cfg = Qwen2Config(hidden_size=args.hidden, num_hidden_layers=args.layers, num_attention_heads=args.hidden // 64,
                  num_key_value_heads=args.hidden // 256, intermediate_size=args.hidden * 11 // 4,
                  vocab_size=151936, max_position_embeddings=4096, tie_word_embeddings=True,
                  attn_implementation="sdpa")
model = Qwen2ForCausalLM(cfg)
torch.cuda.memory._record_memory_history(max_entries=args.max_entries)
targs = TrainingArguments(output_dir="hf_out", per_device_train_batch_size=args.batch,
                          per_device_eval_batch_size=args.eval_batch, max_steps=args.steps, bf16=True,
                          gradient_checkpointing=True, optim="adamw_torch_fused", torch_empty_cache_steps=4,
                          eval_strategy="steps", eval_steps=args.eval_steps, save_strategy="no", report_to=[],
                          logging_steps=5, dataloader_num_workers=0, seed=0)
trainer = Trainer(model=model, args=targs, train_dataset=Conversations(args.steps * args.batch, 1),
                  eval_dataset=Conversations(2 * args.eval_batch, 2), data_collator=collate)
trainer.train()
