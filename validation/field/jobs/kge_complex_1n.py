"""Knowledge-graph completion with ComplEx and 1-N scoring, as the link-prediction repositories (ConvE's, LibKGE's
"KvsAll") train it: each batch holds (subject, relation) pairs, every one scored against all --entities entities
at once (a batch x entities matrix), label-smoothed binary cross-entropy against the multi-hot targets of the
pairs, N3 regularisation, Adagrad. The batches are grouped by relation frequency, so the number of pairs per batch
changes; a filtered evaluation over a held-out split ranks every test triple under torch.no_grad every --eval-every
steps. Random triples. History from step 3 (max_entries 60000); the snapshot is dumped by the OOM observer.
"""
import argparse
import torch, torch.nn as nn, torch.nn.functional as F

p = argparse.ArgumentParser()
p.add_argument("--entities", type=int, default=400000)
p.add_argument("--relations", type=int, default=200)
p.add_argument("--rank", type=int, default=512)
p.add_argument("--batch", type=int, default=1536)
p.add_argument("--eval-batch", type=int, default=2048)
p.add_argument("--eval-every", type=int, default=6)
p.add_argument("--steps", type=int, default=16)
p.add_argument("--history-from", type=int, default=3)
p.add_argument("--max-entries", type=int, default=60000)
args = p.parse_args()

torch._C._cuda_attach_out_of_memory_observer(
    lambda device, alloc, device_alloc, device_free: torch.cuda.memory._dump_snapshot("oom_snapshot.pickle"))


class ComplEx(nn.Module):
    def __init__(self):
        super().__init__()
        self.ent = nn.Embedding(args.entities, 2 * args.rank)
        self.rel = nn.Embedding(args.relations, 2 * args.rank)
        nn.init.normal_(self.ent.weight, std=1e-3)
        nn.init.normal_(self.rel.weight, std=1e-3)

    def forward(self, s, r):
        sr, si = self.ent(s).chunk(2, -1)
        rr, ri = self.rel(r).chunk(2, -1)
        er, ei = self.ent.weight.chunk(2, -1)
        scores = (sr * rr - si * ri) @ er.t() + (sr * ri + si * rr) @ ei.t()
        return scores, (torch.sqrt(sr ** 2 + si ** 2), torch.sqrt(rr ** 2 + ri ** 2))


torch.manual_seed(0)
model = ComplEx().cuda()
opt = torch.optim.Adagrad(model.parameters(), lr=0.1)
gen = torch.Generator().manual_seed(1)
test = torch.stack([torch.randint(0, args.entities, (6000,), generator=gen),
                    torch.randint(0, args.relations, (6000,), generator=gen),
                    torch.randint(0, args.entities, (6000,), generator=gen)], 1)


def evaluate():
    model.eval()
    ranks = []
    with torch.no_grad():
        for i in range(0, len(test), args.eval_batch):
            s, r, o = test[i:i + args.eval_batch].cuda().unbind(1)
            scores = model(s, r)[0]
            target = scores.gather(1, o[:, None])
            ranks.append((scores > target).sum(1) + 1)
    model.train()
    return (1.0 / torch.cat(ranks).float()).mean().item()


for step in range(args.steps):
    if step == args.history_from:
        torch.cuda.memory._record_memory_history(max_entries=args.max_entries)
    pairs = int(args.batch * (0.6 + 0.4 * torch.rand(1, generator=gen).item()))
    s = torch.randint(0, args.entities, (pairs,), generator=gen).cuda()
    r = torch.randint(0, args.relations, (pairs,), generator=gen).cuda()
    objects = torch.randint(0, args.entities, (pairs, 8), generator=gen).cuda()
    targets = torch.zeros(pairs, args.entities, device="cuda").scatter_(1, objects, 1.0)
    targets = (1 - 0.1) * targets + 0.1 / args.entities
    scores, factors = model(s, r)
    loss = F.binary_cross_entropy_with_logits(scores, targets)
    loss = loss + 5e-3 * sum((f ** 3).sum() for f in factors) / pairs
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    print(f"step {step}: {pairs} pairs, loss {loss.item():.5f}", flush=True)
    if (step + 1) % args.eval_every == 0:
        print(f"step {step}: MRR {evaluate():.4f}", flush=True)
