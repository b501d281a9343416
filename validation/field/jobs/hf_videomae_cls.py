"""Video classification fine-tuning of VideoMAE with the HF Trainer, as the HF video-classification tutorial runs it:
VideoMAEForVideoClassification (random init: no download; 16 frames of 224 px in tubelets of 2 x 16 x 16, 1,568
tokens a clip), clips of (frames, channels, height, width) stacked by a collate_fn, remove_unused_columns=False,
bf16, gradient checkpointing, AdamW, eval every --eval-steps with accuracy from compute_metrics. Random clips,
fixed size. History from the start; the snapshot is dumped in the except handler around trainer.train().
"""
import argparse
import torch
from transformers import Trainer, TrainingArguments, VideoMAEConfig, VideoMAEForVideoClassification

p = argparse.ArgumentParser()
p.add_argument("--hidden", type=int, default=768)
p.add_argument("--layers", type=int, default=12)
p.add_argument("--frames", type=int, default=16)
p.add_argument("--labels", type=int, default=400)
p.add_argument("--batch", type=int, default=24)
p.add_argument("--eval-batch", type=int, default=48)
p.add_argument("--steps", type=int, default=10)
p.add_argument("--eval-steps", type=int, default=4)
p.add_argument("--max-entries", type=int, default=100000)
args = p.parse_args()


class RandomClips(torch.utils.data.Dataset):
    def __init__(self, n, seed):
        self.n, self.seed = n, seed

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(self.seed * 1000003 + i)
        return {"video": torch.randn(args.frames, 3, 224, 224, generator=g),
                "label": int(torch.randint(0, args.labels, (1,), generator=g))}


def collate_fn(examples):  # the tutorial's
    return {"pixel_values": torch.stack([e["video"] for e in examples]),
            "labels": torch.tensor([e["label"] for e in examples])}


def compute_metrics(p):
    return {"accuracy": float((p.predictions.argmax(-1) == p.label_ids).mean())}


model = VideoMAEForVideoClassification(VideoMAEConfig(
    hidden_size=args.hidden, num_hidden_layers=args.layers, num_attention_heads=args.hidden // 64,
    intermediate_size=4 * args.hidden, num_frames=args.frames, num_labels=args.labels))
torch.cuda.memory._record_memory_history(max_entries=args.max_entries)
targs = TrainingArguments(output_dir="videomae_out", per_device_train_batch_size=args.batch,
                          per_device_eval_batch_size=args.eval_batch, max_steps=args.steps, bf16=True,
                          gradient_checkpointing=True, eval_strategy="steps", eval_steps=args.eval_steps,
                          save_strategy="no", report_to=[], logging_steps=2, remove_unused_columns=False,
                          learning_rate=5e-5, warmup_steps=2, dataloader_num_workers=0, seed=0)
trainer = Trainer(model=model, args=targs, train_dataset=RandomClips(args.steps * args.batch, 1),
                  eval_dataset=RandomClips(2 * args.eval_batch, 2), data_collator=collate_fn,
                  compute_metrics=compute_metrics)
try:
    trainer.train()
except torch.OutOfMemoryError:
    torch.cuda.memory._dump_snapshot("oom_snapshot.pickle")
    raise
