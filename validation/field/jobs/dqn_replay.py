"""A DQN on stacked 84x84 frames (Mnih et al.), as many small RL repositories write it: the replay buffer
lives on the GPU and grows by torch.cat of every new batch of --envs transitions (uint8 frames), a Nature-CNN
Q-network and its target copy, a minibatch of --batch sampled from the whole buffer, Huber loss, Adam; the target
network synced every --sync steps. Observations are random frames (no emulator on the card). History starts
mid-run, at step --history-from (the job had been running); the snapshot is dumped in the except handler.
"""
import argparse, copy
import torch, torch.nn as nn, torch.nn.functional as F

p = argparse.ArgumentParser()
p.add_argument("--envs", type=int, default=256)
p.add_argument("--collect", type=int, default=16)
p.add_argument("--batch", type=int, default=512)
p.add_argument("--steps", type=int, default=60)
p.add_argument("--sync", type=int, default=10)
p.add_argument("--history-from", type=int, default=20)
p.add_argument("--actions", type=int, default=18)
p.add_argument("--max-entries", type=int, default=100000)
args = p.parse_args()


class NatureCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Sequential(nn.Conv2d(4, 32, 8, 4), nn.ReLU(), nn.Conv2d(32, 64, 4, 2), nn.ReLU(),
                                  nn.Conv2d(64, 64, 3, 1), nn.ReLU(), nn.Flatten())
        self.head = nn.Sequential(nn.Linear(3136, 512), nn.ReLU(), nn.Linear(512, args.actions))

    def forward(self, frames):
        return self.head(self.conv(frames.float() / 255))


q = NatureCNN().cuda()
target = copy.deepcopy(q)
opt = torch.optim.Adam(q.parameters(), lr=1e-4)
obs_buf = torch.empty(0, 4, 84, 84, dtype=torch.uint8, device="cuda")
next_buf = torch.empty(0, 4, 84, 84, dtype=torch.uint8, device="cuda")
act_buf = torch.empty(0, dtype=torch.long, device="cuda")
rew_buf = torch.empty(0, device="cuda")
obs = torch.randint(0, 256, (args.envs, 4, 84, 84), dtype=torch.uint8, device="cuda")
try:
    for step in range(args.steps):
        if step == args.history_from:
            torch.cuda.memory._record_memory_history(max_entries=args.max_entries)
        for _ in range(args.collect):
            with torch.no_grad():
                action = q(obs).argmax(1)
            next_obs = torch.randint(0, 256, (args.envs, 4, 84, 84), dtype=torch.uint8, device="cuda")
            obs_buf = torch.cat([obs_buf, obs])
            next_buf = torch.cat([next_buf, next_obs])
            act_buf = torch.cat([act_buf, action])
            rew_buf = torch.cat([rew_buf, torch.rand(args.envs, device="cuda")])
            obs = next_obs
        idx = torch.randint(0, len(obs_buf), (args.batch,), device="cuda")
        with torch.no_grad():
            td_target = rew_buf[idx] + 0.99 * target(next_buf[idx]).max(1).values
        loss = F.smooth_l1_loss(q(obs_buf[idx]).gather(1, act_buf[idx, None]).squeeze(1), td_target)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if step % args.sync == 0:
            target.load_state_dict(q.state_dict())
        if step % 10 == 0:
            print(f"step {step}: buffer {len(obs_buf)} loss {loss.item():.4f}", flush=True)
except torch.OutOfMemoryError:
    torch.cuda.memory._dump_snapshot("oom_snapshot.pickle")
    raise
