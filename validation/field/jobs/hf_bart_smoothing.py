"""Summarisation fine-tuning of BART with the HF Seq2SeqTrainer and label smoothing, as the summarization example
runs it with --label_smoothing_factor 0.1 (BartForConditionalGeneration from config, random init: no download;
random token ids).

The Trainer's LabelSmoother takes the log-softmax of the logits itself (the model gets no labels argument to compute
its own loss); articles and summaries of random length, DataCollatorForSeq2Seq-style padding (labels -100),
gradient accumulation over 2 micro-steps, bf16, AdamW, eval every --eval-steps. History from the start; the
snapshot is dumped by the OOM observer.
"""
import argparse, random
import torch
from transformers import BartConfig, BartForConditionalGeneration, Seq2SeqTrainer, Seq2SeqTrainingArguments

p = argparse.ArgumentParser()
p.add_argument("--d-model", type=int, default=1024)
p.add_argument("--layers", type=int, default=12)
p.add_argument("--batch", type=int, default=16)
p.add_argument("--eval-batch", type=int, default=32)
p.add_argument("--steps", type=int, default=10)
p.add_argument("--eval-steps", type=int, default=4)
p.add_argument("--max-entries", type=int, default=100000)
args = p.parse_args()
VOCAB, PAD = 50265, 1


def oom_observer(device, alloc, device_alloc, device_free):
    torch.cuda.memory._dump_snapshot("oom_snapshot.pickle")


torch._C._cuda_attach_out_of_memory_observer(oom_observer)


class RandomArticles(torch.utils.data.Dataset):
    def __init__(self, n, seed):
        rng = random.Random(seed)
        self.rows = []
        for _ in range(n):
            article = [rng.randrange(4, VOCAB) for _ in range(max(64, min(1022, int(rng.lognormvariate(6.2, 0.6)))))]
            summary = [rng.randrange(4, VOCAB) for _ in range(max(16, min(256, int(rng.lognormvariate(4.3, 0.5)))))]
            self.rows.append(([0] + article + [2], summary + [2]))

    def __len__(self):
        return len(self.rows)

    def __getitem__(self, i):
        return self.rows[i]


def collate(rows):
    n, m = max(len(a) for a, _ in rows), max(len(s) for _, s in rows)
    ids = torch.full((len(rows), n), PAD, dtype=torch.long)
    mask = torch.zeros((len(rows), n), dtype=torch.long)
    labels = torch.full((len(rows), m), -100, dtype=torch.long)
    for i, (a, s) in enumerate(rows):
        ids[i, :len(a)], mask[i, :len(a)] = torch.tensor(a), 1
        labels[i, :len(s)] = torch.tensor(s)
    # DataCollatorForSeq2Seq(model=...): the labels shifted right, since under label smoothing the model gets none
    decoder_ids = model.prepare_decoder_input_ids_from_labels(labels=labels.masked_fill(labels == -100, PAD))
    return {"input_ids": ids, "attention_mask": mask, "labels": labels, "decoder_input_ids": decoder_ids}


model = BartForConditionalGeneration(BartConfig(vocab_size=VOCAB, d_model=args.d_model, encoder_layers=args.layers,
                                                decoder_layers=args.layers, encoder_attention_heads=args.d_model // 64,
                                                decoder_attention_heads=args.d_model // 64,
                                                encoder_ffn_dim=4 * args.d_model, decoder_ffn_dim=4 * args.d_model,
                                                max_position_embeddings=1024, pad_token_id=PAD))
targs = Seq2SeqTrainingArguments(output_dir="hf_out", per_device_train_batch_size=args.batch,
                                 per_device_eval_batch_size=args.eval_batch, gradient_accumulation_steps=2,
                                 max_steps=args.steps, bf16=True, label_smoothing_factor=0.1,
                                 eval_strategy="steps", eval_steps=args.eval_steps, save_strategy="no",
                                 report_to=[], logging_steps=2, dataloader_num_workers=0, seed=0,
                                 prediction_loss_only=True, remove_unused_columns=False)
torch.cuda.memory._record_memory_history(max_entries=args.max_entries)
trainer = Seq2SeqTrainer(model=model, args=targs, train_dataset=RandomArticles(2 * args.steps * args.batch, 1),
                         eval_dataset=RandomArticles(2 * args.eval_batch, 2), data_collator=collate)
trainer.train()
