"""Speech recognition fine-tuning of wav2vec 2.0 with CTC and the HF Trainer, as the HF blog "Fine-Tune Wav2Vec2 for
English ASR" runs it: Wav2Vec2ForCTC (random init: no download), the feature encoder frozen, the blog's
DataCollatorCTCWithPadding (audio padded to the batch's longest, labels padded with -100), the config's LayerDrop
(0.1: each step skips a random set of layers), bf16, eval every --eval-steps; without the blog's gradient
checkpointing (its recompute failed here with a SystemError in F.dropout, batch 28). Random utterances of 2 to
12 s and transcripts about as long. History from step --history-from-step; the snapshot is dumped in an except
handler around trainer.train().
"""
import argparse, random
import torch
from transformers import Trainer, TrainerCallback, TrainingArguments, Wav2Vec2Config, Wav2Vec2ForCTC

p = argparse.ArgumentParser()
p.add_argument("--hidden", type=int, default=1024)
p.add_argument("--layers", type=int, default=24)
p.add_argument("--batch", type=int, default=32)
p.add_argument("--eval-batch", type=int, default=32)
p.add_argument("--steps", type=int, default=12)
p.add_argument("--eval-steps", type=int, default=5)
p.add_argument("--history-from-step", type=int, default=2)
p.add_argument("--max-entries", type=int, default=100000)
args = p.parse_args()
RATE, VOCAB = 16000, 32


class RandomSpeech(torch.utils.data.Dataset):
    def __init__(self, n, seed):
        rng = random.Random(seed)
        self.rows = [(rng.randrange(2 * RATE, 12 * RATE), rng.randrange(1 << 30)) for _ in range(n)]

    def __len__(self):
        return len(self.rows)

    def __getitem__(self, i):
        samples, seed = self.rows[i]
        g = torch.Generator().manual_seed(seed)
        chars = max(4, samples // RATE * 14)  # about 14 characters a second
        return {"input_values": torch.randn(samples, generator=g),
                "labels": torch.randint(1, VOCAB, (chars,), generator=g)}


class DataCollatorCTCWithPadding:  # the blog's, without a processor: pad audio with 0, labels with -100
    def __call__(self, features):
        audio = torch.nn.utils.rnn.pad_sequence([f["input_values"] for f in features], batch_first=True)
        mask = torch.nn.utils.rnn.pad_sequence([torch.ones(len(f["input_values"]), dtype=torch.long)
                                                for f in features], batch_first=True)
        labels = torch.nn.utils.rnn.pad_sequence([f["labels"] for f in features], batch_first=True,
                                                 padding_value=-100)
        return {"input_values": audio, "attention_mask": mask, "labels": labels}


class StartHistory(TrainerCallback):
    def on_step_begin(self, targs, state, control, **kw):
        if state.global_step == args.history_from_step:
            torch.cuda.memory._record_memory_history(max_entries=args.max_entries)


config = Wav2Vec2Config(hidden_size=args.hidden, num_hidden_layers=args.layers,
                        num_attention_heads=args.hidden // 64, intermediate_size=4 * args.hidden,
                        vocab_size=VOCAB, pad_token_id=0, ctc_loss_reduction="mean", feat_extract_norm="layer",
                        do_stable_layer_norm=True, mask_time_prob=0.05)
model = Wav2Vec2ForCTC(config)
model.freeze_feature_encoder()
targs = TrainingArguments(output_dir="w2v_out", per_device_train_batch_size=args.batch,
                          per_device_eval_batch_size=args.eval_batch, max_steps=args.steps, bf16=True,
                          eval_strategy="steps", eval_steps=args.eval_steps,
                          save_strategy="no", report_to=[], logging_steps=4, learning_rate=1e-4, warmup_steps=2,
                          dataloader_num_workers=0, seed=0)
callbacks = [StartHistory()] if args.history_from_step else []
if not args.history_from_step:
    torch.cuda.memory._record_memory_history(max_entries=args.max_entries)
trainer = Trainer(model=model, args=targs, train_dataset=RandomSpeech(args.steps * args.batch, 1),
                  eval_dataset=RandomSpeech(2 * args.eval_batch, 2), data_collator=DataCollatorCTCWithPadding(),
                  callbacks=callbacks)
try:
    trainer.train()
except torch.OutOfMemoryError:
    torch.cuda.memory._dump_snapshot("oom_snapshot.pickle")
    raise
