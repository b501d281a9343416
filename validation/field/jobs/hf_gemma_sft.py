"""Supervised fine-tuning of a Gemma-style model under the HF Trainer on packed sequences, as SFT scripts run it.

GemmaForCausalLM from config (random init: no download; Gemma's 256k vocabulary, tied embeddings, multi-query
attention), every sample packed to --seq tokens (constant shapes), gradient checkpointing, optim
"adamw_torch_fused", bf16, eval every --eval-steps with a larger eval batch. History from the start; the snapshot
is dumped in an `except` handler around trainer.train().
"""
import argparse
import torch
from transformers import GemmaConfig, GemmaForCausalLM, Trainer, TrainingArguments

p = argparse.ArgumentParser()
p.add_argument("--hidden", type=int, default=1024)
p.add_argument("--layers", type=int, default=8)
p.add_argument("--batch", type=int, default=2)
p.add_argument("--eval-batch", type=int, default=4)
p.add_argument("--seq", type=int, default=2048)
p.add_argument("--steps", type=int, default=10)
p.add_argument("--eval-steps", type=int, default=4)
p.add_argument("--max-entries", type=int, default=100000)
args = p.parse_args()
VOCAB = 256000


class Packed(torch.utils.data.Dataset):
    def __init__(self, n, seed):
        self.ids = torch.randint(0, VOCAB, (n, args.seq), generator=torch.Generator().manual_seed(seed))

    def __len__(self):
        return len(self.ids)

    def __getitem__(self, i):
        return {"input_ids": self.ids[i], "labels": self.ids[i]}


config = GemmaConfig(vocab_size=VOCAB, hidden_size=args.hidden, intermediate_size=args.hidden * 4,
                     num_hidden_layers=args.layers, num_attention_heads=args.hidden // 128, num_key_value_heads=1,
                     head_dim=128, max_position_embeddings=8192)
config._attn_implementation = "sdpa"
model = GemmaForCausalLM(config)
targs = TrainingArguments(output_dir="hf_out", per_device_train_batch_size=args.batch,
                          per_device_eval_batch_size=args.eval_batch, max_steps=args.steps, bf16=True,
                          gradient_checkpointing=True, optim="adamw_torch_fused", eval_strategy="steps",
                          eval_steps=args.eval_steps, save_strategy="no", report_to=[], logging_steps=2,
                          dataloader_num_workers=0, seed=0, prediction_loss_only=True, remove_unused_columns=False)
torch.cuda.memory._record_memory_history(max_entries=args.max_entries)
trainer = Trainer(model=model, args=targs, train_dataset=Packed(args.steps * args.batch, 1),
                  eval_dataset=Packed(2 * args.eval_batch, 2))
try:
    trainer.train()
except torch.OutOfMemoryError:
    torch.cuda.memory._dump_snapshot("oom_snapshot.pickle")
    raise
