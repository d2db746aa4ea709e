"""Data-parallel training with torch.distributed on CPUs (gloo), run by trainlet's torch plugin.

Started directly (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT from trainlet) or under torchrun
(which reads trainlet's PET_* variables): init_process_group reads the same env either way.
Every rank checks an all_reduce against the closed form, then trains a tiny DistributedDataParallel
model for a few steps and checks that all replicas hold the same weights.
"""
import os
import socket
import sys

import torch
import torch.distributed as dist


def main():
    dist.init_process_group(backend="gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    where = f"rank {rank} of {world} on {socket.gethostname()}"

    # Each rank contributes rank + 1: the sum is world * (world + 1) / 2.
    t = torch.tensor([float(rank + 1)])
    dist.all_reduce(t, op=dist.ReduceOp.SUM)
    expected = world * (world + 1) / 2
    ok = t.item() == expected
    print(f"{where}: all_reduce sum {t.item():g} (expected {expected:g}) {'OK' if ok else 'WRONG'}",
          flush=True)

    # A few DDP steps on rank-dependent data; gradients are averaged, so replicas stay equal.
    torch.manual_seed(0)
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(4, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    gen = torch.Generator().manual_seed(rank)
    for _ in range(3):
        x = torch.randn(8, 4, generator=gen)
        loss = (model(x) - x.sum(dim=1, keepdim=True)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    weights = torch.cat([p.detach().flatten() for p in model.parameters()])
    gathered = [torch.zeros_like(weights) for _ in range(world)]
    dist.all_gather(gathered, weights)
    same = all(torch.equal(g, gathered[0]) for g in gathered)
    print(f"{where}: ddp replicas {'in sync' if same else 'DIVERGED'} "
          f"(local rank {os.environ.get('LOCAL_RANK', '?')})", flush=True)

    dist.destroy_process_group()
    return 0 if ok and same else 1


if __name__ == "__main__":
    sys.exit(main())
