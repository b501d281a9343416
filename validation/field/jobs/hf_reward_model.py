"""A pairwise reward model trained as TRL's RewardTrainer does it, written as a Trainer subclass whose
compute_loss runs the chosen and the rejected responses in one padded batch through a Llama with a scalar head
(LlamaForSequenceClassification, num_labels=1) and takes -logsigmoid(r_chosen - r_rejected). Prompts and
responses of random length (pad to the longest), bf16, gradient checkpointing, eval every --eval-steps. History
from --history-from-step through a callback; the snapshot is dumped in the except handler around train().
"""
import argparse, random
import torch, torch.nn.functional as F
from transformers import LlamaConfig, LlamaForSequenceClassification, Trainer, TrainerCallback, TrainingArguments

p = argparse.ArgumentParser()
p.add_argument("--hidden", type=int, default=2048)
p.add_argument("--layers", type=int, default=16)
p.add_argument("--batch", type=int, default=8, help="pairs per step")
p.add_argument("--eval-batch", type=int, default=16)
p.add_argument("--max-len", type=int, default=2048)
p.add_argument("--steps", type=int, default=14)
p.add_argument("--eval-steps", type=int, default=5)
p.add_argument("--history-from-step", type=int, default=3)
p.add_argument("--max-entries", type=int, default=100000)
args = p.parse_args()
PAD = 0


class Pairs(torch.utils.data.Dataset):
    def __init__(self, n, seed):
        rng = random.Random(seed)
        self.rows = []
        for _ in range(n):
            prompt = [rng.randrange(1, 32000) for _ in range(int(rng.lognormvariate(5.5, 0.6)))]
            self.rows.append({k: (prompt + [rng.randrange(1, 32000) for _ in range(int(rng.lognormvariate(5.8, 0.7)))]
                                  )[:args.max_len] for k in ("chosen", "rejected")})

    def __len__(self):
        return len(self.rows)

    def __getitem__(self, i):
        return self.rows[i]


def collate(rows):
    seqs = [r["chosen"] for r in rows] + [r["rejected"] for r in rows]
    n = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), n), PAD, dtype=torch.long)
    mask = torch.zeros(len(seqs), n, dtype=torch.long)
    for i, s in enumerate(seqs):
        ids[i, :len(s)] = torch.tensor(s)
        mask[i, :len(s)] = 1
    return {"input_ids": ids, "attention_mask": mask}


class RewardTrainer(Trainer):
    def compute_loss(self, model, inputs, return_outputs=False, **kw):
        rewards = model(**inputs).logits.squeeze(-1)
        chosen, rejected = rewards.chunk(2)
        loss = -F.logsigmoid(chosen - rejected).mean()
        return (loss, {"rewards": rewards}) if return_outputs else loss


class StartHistory(TrainerCallback):
    def on_step_begin(self, targs, state, control, **kw):
        if state.global_step == args.history_from_step:
            torch.cuda.memory._record_memory_history(max_entries=args.max_entries)


model = LlamaForSequenceClassification(LlamaConfig(
    hidden_size=args.hidden, num_hidden_layers=args.layers, num_attention_heads=args.hidden // 128,
    num_key_value_heads=args.hidden // 256, intermediate_size=args.hidden * 8 // 3 // 64 * 64, vocab_size=32000,
    max_position_embeddings=4096, num_labels=1, pad_token_id=PAD))
targs = TrainingArguments(output_dir="hf_out", per_device_train_batch_size=args.batch,
                          per_device_eval_batch_size=args.eval_batch, max_steps=args.steps, bf16=True,
                          eval_strategy="steps", eval_steps=args.eval_steps, save_strategy="no", report_to=[],
                          logging_steps=5, gradient_checkpointing=True, remove_unused_columns=False,
                          dataloader_num_workers=0, seed=0)
trainer = RewardTrainer(model=model, args=targs, train_dataset=Pairs(args.steps * args.batch, 1),
                        eval_dataset=Pairs(2 * args.eval_batch, 2), data_collator=collate,
                        callbacks=[StartHistory()])
try:
    trainer.train()
except torch.OutOfMemoryError:
    torch.cuda.memory._dump_snapshot("oom_snapshot.pickle")
    raise
