#!/usr/bin/env python3
"""Records one training run's memory for `fragscope plan`'s levers (tests/data/plan/README.md).

The loop is the fixtures' recorder's (../shared/fixtures/record.py): HF LlamaForCausalLM from a
random init on the GPU, `torch.empty(1)` first, torch.autocast(bf16) over fp32 parameters,
`model(input_ids=ids, labels=ids).loss / ga`, backward, an optimizer step and
`zero_grad(set_to_none=True)` every ga micro-steps, lengths fixed or log-normal(7.0, 0.6)
clipped to [min_len, max_len] from a fixed seed. Each lever is one flag:

  --optimizer adamw|sgd|adamw-8bit  --optimizer-impl foreach|fused|single-tensor
  --precision amp-bf16|bf16|fp32    (bf16: parameters built in bf16, no autocast)
  --loss chunked --loss-chunk N     (lm_head + cross-entropy per N tokens, each checkpointed)
  --ckpt [--ckpt-layers K]          (HF gradient checkpointing of the first K blocks)
  --no-cache                        (use_cache=False in the training forward)

It writes meta.json (arguments, params, outcome, max_memory_allocated, max_memory_reserved),
steps.jsonl (per micro-step memory stats) and, with --history, snapshot.pickle.
"""
import argparse, json, os, random, time

STAT_KEYS = ["allocated_bytes.all.current", "reserved_bytes.all.current", "active_bytes.all.current",
             "inactive_split_bytes.all.current", "requested_bytes.all.current", "num_alloc_retries",
             "num_ooms", "segment.all.current", "allocated_bytes.all.peak", "reserved_bytes.all.peak"]


def lengths(n, lo, hi, seed):
    rng = random.Random(seed)
    return [int(max(lo, min(hi, rng.lognormvariate(7.0, 0.6)))) // 8 * 8 for _ in range(n)]


def build(args, torch):
    from transformers import LlamaConfig, LlamaForCausalLM
    cfg = LlamaConfig(hidden_size=args.hidden, num_hidden_layers=args.layers, num_attention_heads=args.heads,
                      num_key_value_heads=(args.kv_heads or args.heads), intermediate_size=args.inter,
                      vocab_size=args.vocab, max_position_embeddings=8192)
    try:
        cfg._attn_implementation = args.attn
    except Exception:  # noqa: the fixtures' recorder tolerates configs without the setter
        pass
    if args.precision == "bf16":
        torch.set_default_dtype(torch.bfloat16)  # built in bf16, as from_pretrained(dtype=bf16) loads
    with torch.device("cuda"):
        m = LlamaForCausalLM(cfg)
    torch.set_default_dtype(torch.float32)
    if args.ckpt:
        m.gradient_checkpointing_enable()
        for layer in m.model.layers[args.ckpt_layers or args.layers:]:
            layer.gradient_checkpointing = False  # only the first ckpt_layers blocks
    m.train()
    return m


def make_optimizer(args, torch, params):
    if args.optimizer == "sgd":
        return torch.optim.SGD(params, lr=1e-3, momentum=0.9)
    if args.optimizer == "adamw-8bit":
        import bitsandbytes
        return bitsandbytes.optim.AdamW8bit(params, lr=1e-4)
    impl = {"foreach": {}, "fused": {"fused": True}, "single-tensor": {"foreach": False}}[args.optimizer_impl]
    return torch.optim.AdamW(params, lr=1e-4, **impl)


def chunked_loss(model, ids, chunk, use_cache, torch):
    """The loss as a memory-saving training script writes it: the decoder's hidden states, then
    lm_head + cross-entropy over chunks of `chunk` tokens, each under a non-reentrant checkpoint,
    so one chunk's logits exist at a time (forward and backward)."""
    import torch.nn.functional as F
    from torch.utils.checkpoint import checkpoint

    def chunk_ce(hidden, labels):
        logits = model.lm_head(hidden).float()
        return F.cross_entropy(logits, labels, ignore_index=-100, reduction="sum")

    out = model.model(input_ids=ids, use_cache=use_cache)
    hidden = out.last_hidden_state.view(-1, model.config.hidden_size)
    labels = F.pad(ids, (0, 1), value=-100)[..., 1:].contiguous().view(-1)  # ForCausalLMLoss's shift
    total = 0
    for h, l in zip(hidden.split(chunk), labels.split(chunk)):
        total = total + checkpoint(chunk_ce, h, l, use_reentrant=False)
    return total / (ids.shape[0] * (ids.shape[1] - 1))


def run(args):
    import torch
    os.makedirs(args.out, exist_ok=True)
    meta = {"scenario": args.name, "alloc_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""),
            "torch": torch.__version__, "device": torch.cuda.get_device_name(0), "args": vars(args)}
    torch.manual_seed(0)
    torch.cuda.init()
    torch.empty(1, device="cuda")  # context
    if args.history:
        torch.cuda.reset_peak_memory_stats()
        torch.cuda.memory._record_memory_history(max_entries=3_000_000, stacks="python")
    model = build(args, torch)
    meta["params"] = sum(p.numel() for p in model.parameters())
    meta["param_dtype"] = str(next(model.parameters()).dtype)
    opt = make_optimizer(args, torch, model.parameters())
    lens = [args.fixed_len] * args.steps if args.fixed_len else lengths(args.steps, args.min_len, args.max_len,
                                                                        args.seed)
    autocast = args.precision == "amp-bf16"
    stepf = open(os.path.join(args.out, "steps.jsonl"), "w")
    meta["outcome"] = "completed"
    t_start = time.time()
    try:
        for step in range(args.steps):
            L = lens[step]
            ids = torch.randint(0, args.vocab, (args.mbs, L), device="cuda")
            with torch.autocast("cuda", dtype=torch.bfloat16, enabled=autocast):
                if args.loss == "chunked":
                    loss = chunked_loss(model, ids, args.loss_chunk, not args.no_cache, torch) / args.ga
                elif args.no_cache:
                    loss = model(input_ids=ids, labels=ids, use_cache=False).loss / args.ga
                else:
                    loss = model(input_ids=ids, labels=ids).loss / args.ga
            loss.backward()
            did_opt = (step + 1) % args.ga == 0
            if did_opt:
                opt.step()
                opt.zero_grad(set_to_none=True)
            torch.cuda.synchronize()
            s = torch.cuda.memory_stats()
            rec = {"step": step, "seq_len": L, "mbs": args.mbs, "optimizer_step": did_opt, "t": time.time() - t_start}
            rec.update({k: s.get(k, 0) for k in STAT_KEYS})
            stepf.write(json.dumps(rec) + "\n")
            stepf.flush()
            del ids, loss
    except torch.OutOfMemoryError as e:
        meta["outcome"] = "oom"
        meta["oom_step"] = step
        meta["oom_message"] = str(e)
    meta["wall_s"] = time.time() - t_start
    meta["max_memory_allocated"] = torch.cuda.max_memory_allocated()
    meta["max_memory_reserved"] = torch.cuda.max_memory_reserved()
    meta["num_alloc_retries"] = torch.cuda.memory_stats().get("num_alloc_retries", 0)
    if args.history:
        torch.cuda.memory._dump_snapshot(os.path.join(args.out, "snapshot.pickle"))
        torch.cuda.memory._record_memory_history(enabled=None)
    with open(os.path.join(args.out, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1)
    print(json.dumps({k: meta.get(k) for k in ["scenario", "outcome", "max_memory_allocated", "max_memory_reserved",
                                                "wall_s", "alloc_conf", "param_dtype"]}), flush=True)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("name")
    p.add_argument("--out", required=True)
    p.add_argument("--hidden", type=int, default=2048)
    p.add_argument("--layers", type=int, default=16)
    p.add_argument("--heads", type=int, default=16)
    p.add_argument("--kv-heads", type=int, default=0)
    p.add_argument("--inter", type=int, default=5632)
    p.add_argument("--vocab", type=int, default=32000)
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--mbs", type=int, default=4)
    p.add_argument("--ga", type=int, default=2)
    p.add_argument("--fixed-len", type=int, default=0)
    p.add_argument("--min-len", type=int, default=256)
    p.add_argument("--max-len", type=int, default=4096)
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--attn", default="sdpa")
    p.add_argument("--ckpt", action="store_true")
    p.add_argument("--ckpt-layers", type=int, default=0, help="checkpoint only the first K blocks")
    p.add_argument("--no-cache", action="store_true")
    p.add_argument("--precision", default="amp-bf16", choices=["amp-bf16", "bf16", "fp32"])
    p.add_argument("--optimizer", default="adamw", choices=["adamw", "sgd", "adamw-8bit"])
    p.add_argument("--optimizer-impl", default="foreach", choices=["foreach", "fused", "single-tensor"])
    p.add_argument("--loss", default="standard", choices=["standard", "chunked"])
    p.add_argument("--loss-chunk", type=int, default=4096)
    p.add_argument("--history", action="store_true")
    run(p.parse_args())


if __name__ == "__main__":
    main()
