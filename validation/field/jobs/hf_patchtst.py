"""Long-horizon multivariate forecasting with PatchTST and the HF Trainer, as the Hugging Face blog's "Patch
Time Series Transformer" walkthrough trains it on a traffic/electricity-style dataset: PatchTSTForPrediction
from config (random init: no download), --channels series handled channel-independently (each channel its
own sequence of patches), a --context window cut into patches, MSE on the next --horizon values, bf16,
evaluation every --eval-steps with a larger eval batch (loss only). Random series, fixed shapes. History from
the start; the snapshot is dumped by the OOM observer.
"""
import argparse
import torch
from transformers import PatchTSTConfig, PatchTSTForPrediction, Trainer, TrainingArguments

p = argparse.ArgumentParser()
p.add_argument("--channels", type=int, default=321)
p.add_argument("--context", type=int, default=1024)
p.add_argument("--horizon", type=int, default=96)
p.add_argument("--patch", type=int, default=16)
p.add_argument("--d-model", type=int, default=128)
p.add_argument("--layers", type=int, default=4)
p.add_argument("--batch", type=int, default=8)
p.add_argument("--eval-batch", type=int, default=16)
p.add_argument("--steps", type=int, default=10)
p.add_argument("--eval-steps", type=int, default=4)
p.add_argument("--max-entries", type=int, default=100000)
args = p.parse_args()


class RandomSeries(torch.utils.data.Dataset):
    def __init__(self, n, seed):
        self.n, self.seed = n, seed

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(self.seed * 1000003 + i)
        series = torch.randn(args.context + args.horizon, args.channels, generator=g).cumsum(0)
        return {"past_values": series[:args.context], "future_values": series[args.context:]}


config = PatchTSTConfig(num_input_channels=args.channels, context_length=args.context,
                        prediction_length=args.horizon, patch_length=args.patch, patch_stride=args.patch // 2,
                        d_model=args.d_model, num_attention_heads=8, num_hidden_layers=args.layers,
                        ffn_dim=4 * args.d_model, dropout=0.1, head_dropout=0.1, scaling="std", loss="mse")
model = PatchTSTForPrediction(config)
torch.cuda.memory._record_memory_history(max_entries=args.max_entries)
torch._C._cuda_attach_out_of_memory_observer(
    lambda device, alloc, device_alloc, device_free: torch.cuda.memory._dump_snapshot("oom_snapshot.pickle"))
targs = TrainingArguments(output_dir="hf_out", per_device_train_batch_size=args.batch,
                          per_device_eval_batch_size=args.eval_batch, max_steps=args.steps, bf16=True,
                          eval_strategy="steps", eval_steps=args.eval_steps, save_strategy="no", report_to=[],
                          logging_steps=2, remove_unused_columns=False, learning_rate=1e-4, warmup_steps=2,
                          dataloader_num_workers=0, seed=0, prediction_loss_only=True)
trainer = Trainer(model=model, args=targs, train_dataset=RandomSeries(args.steps * args.batch, 1),
                  eval_dataset=RandomSeries(2 * args.eval_batch, 2))
trainer.train()
