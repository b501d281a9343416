"""Speech recognition fine-tuning of Whisper with the HF Seq2SeqTrainer, as Hugging Face's "Fine-Tune Whisper"
blog runs it (WhisperForConditionalGeneration, random init: no download; random log-mel features).

80 × 3000 log-mel frames per example (30 s, fixed), transcripts of varying length padded per batch with -100 by
the blog's collator (the leading decoder start token cut), fp16 with the GradScaler, gradient checkpointing,
use_cache off, eval every --eval-steps (loss only: predict_with_generate off). History from step
--history-from-step (mid-run); the snapshot is dumped in the except handler around trainer.train().
"""
import argparse, random
import torch
from transformers import (Seq2SeqTrainer, Seq2SeqTrainingArguments, TrainerCallback, WhisperConfig,
                          WhisperForConditionalGeneration)

p = argparse.ArgumentParser()
p.add_argument("--d-model", type=int, default=768)
p.add_argument("--layers", type=int, default=12)
p.add_argument("--batch", type=int, default=32)
p.add_argument("--eval-batch", type=int, default=32)
p.add_argument("--steps", type=int, default=10)
p.add_argument("--eval-steps", type=int, default=4)
p.add_argument("--no-ckpt", action="store_true")
p.add_argument("--history-from-step", type=int, default=2)
p.add_argument("--max-entries", type=int, default=100000)
args = p.parse_args()
START = 50258


class RandomSpeech(torch.utils.data.Dataset):
    def __init__(self, n, seed):
        rng = random.Random(seed)
        lengths = [max(8, min(440, int(rng.lognormvariate(4.3, 0.7)))) for _ in range(n)]
        self.labels = [[START] + [rng.randrange(0, 50257) for _ in range(k)] + [50257] for k in lengths]
        self.seed = seed

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(self.seed * 1000003 + i)
        return {"input_features": torch.randn(80, 3000, generator=g), "labels": self.labels[i]}


def collate(rows):
    # the blog's DataCollatorSpeechSeq2SeqWithPadding: pad labels with -100, cut the start token the model adds
    n = max(len(r["labels"]) for r in rows)
    labels = torch.full((len(rows), n), -100, dtype=torch.long)
    for i, r in enumerate(rows):
        labels[i, :len(r["labels"])] = torch.tensor(r["labels"])
    if (labels[:, 0] == START).all():
        labels = labels[:, 1:]
    return {"input_features": torch.stack([r["input_features"] for r in rows]), "labels": labels}


class StartHistory(TrainerCallback):
    def on_step_begin(self, targs, state, control, **kw):
        if state.global_step == args.history_from_step:
            torch.cuda.memory._record_memory_history(max_entries=args.max_entries)


heads = args.d_model // 64
model = WhisperForConditionalGeneration(WhisperConfig(
    vocab_size=51865, num_mel_bins=80, d_model=args.d_model, encoder_layers=args.layers, decoder_layers=args.layers,
    encoder_attention_heads=heads, decoder_attention_heads=heads, encoder_ffn_dim=4 * args.d_model,
    decoder_ffn_dim=4 * args.d_model, max_source_positions=1500, max_target_positions=448, pad_token_id=50257,
    bos_token_id=50257, eos_token_id=50257, decoder_start_token_id=START))
model.config.use_cache = False
targs = Seq2SeqTrainingArguments(output_dir="whisper_out", per_device_train_batch_size=args.batch,
                                 per_device_eval_batch_size=args.eval_batch, max_steps=args.steps, fp16=True,
                                 gradient_checkpointing=not args.no_ckpt, eval_strategy="steps",
                                 eval_steps=args.eval_steps, save_strategy="no", report_to=[], logging_steps=2,
                                 learning_rate=1e-5, warmup_steps=2, predict_with_generate=False,
                                 remove_unused_columns=False, dataloader_num_workers=0, seed=0)
callbacks = [StartHistory()] if args.history_from_step else []
if not args.history_from_step:
    torch.cuda.memory._record_memory_history(max_entries=args.max_entries)
trainer = Seq2SeqTrainer(model=model, args=targs, train_dataset=RandomSpeech(args.steps * args.batch, 1),
                         eval_dataset=RandomSpeech(2 * args.eval_batch, 2), data_collator=collate,
                         callbacks=callbacks)
try:
    trainer.train()
except torch.OutOfMemoryError:
    torch.cuda.memory._dump_snapshot("oom_snapshot.pickle")
    raise
