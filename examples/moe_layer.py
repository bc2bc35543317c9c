"""A small expert-parallel MoE training loop, for `commbench record` (run it under torchrun).

    torchrun --nproc-per-node 4 examples/moe_layer.py --steps 4
    commbench record --out results/trace-moe -- torchrun --nproc-per-node 4 examples/moe_layer.py

Every rank holds ``--experts / world`` experts (two-layer MLPs) and a copy of the router. Each
step, each rank draws its own batch of ``--tokens`` random tokens (seeded by rank and step, so
routing is uneven and differs per rank and per step), and its top-k softmax router picks
``--topk`` experts per token. Then, as expert-parallel MoE code does (torchtitan, Megatron):

1. the ranks exchange how many tokens each sends to each expert (an ``all_to_all_single`` of
   the per-expert counts, ``--experts`` int64 a rank), which gives the split sizes;
2. dispatch: the token copies, sorted by expert, go to the ranks hosting their experts
   (``all_to_all_single`` with uneven input and output split sizes, rows of ``--hidden``);
3. each rank runs its experts on what it received;
4. combine: the results go back (the reverse ``all_to_all_single``) and are summed per token
   with the router's weights;
5. a loss and its backward (the backward of dispatch and combine is an all-to-all each, with
   the split sizes swapped: torch's functional ``all_to_all_single`` has autograd), one
   allreduce of the replicated part's gradients (an input projection, standing in for what
   comes before the MoE layer, and the router), an optimizer step.

Four all-to-alls of token rows a step, each with uneven split sizes, plus the counts.

``--facts DIR`` writes ``facts-rank-<r>.json`` per rank: the split sizes the rank handed each
dispatch (token rows per destination rank, per step), for a test to set beside a recording.
Only torch is needed; gloo on CPUs by default.
"""

import argparse
import json
from pathlib import Path

import torch
import torch.distributed as dist

try:  # torch's maintained all-to-all with autograd (the deprecated one lives in dist.nn)
    from torch.distributed._functional_collectives import all_to_all_single_autograd
except ImportError:  # an older torch: the same, as an autograd Function
    all_to_all_single_autograd = None


class _AllToAll(torch.autograd.Function):
    """all_to_all_single whose backward is the reverse all-to-all (split sizes swapped)."""

    @staticmethod
    def forward(ctx, tensor, output_splits, input_splits, group):
        ctx.splits, ctx.group = (output_splits, input_splits), group
        out = tensor.new_empty((sum(output_splits), *tensor.shape[1:]))
        dist.all_to_all_single(out, tensor.contiguous(), output_splits, input_splits,
                               group=group)
        return out

    @staticmethod
    def backward(ctx, grad):
        output_splits, input_splits = ctx.splits
        back = _AllToAll.apply(grad.contiguous(), input_splits, output_splits, ctx.group)
        return back, None, None, None


def all_to_all(tensor, output_splits: list[int], input_splits: list[int], group=None):
    group = group or dist.group.WORLD
    if all_to_all_single_autograd is not None:
        return all_to_all_single_autograd(tensor, output_splits, input_splits, group)
    return _AllToAll.apply(tensor, output_splits, input_splits, group)


class MoELayer(torch.nn.Module):
    """A top-k router (replicated) and this rank's share of the experts."""

    def __init__(self, hidden: int, experts: int, topk: int, world: int, rank: int) -> None:
        super().__init__()
        if experts % world:
            raise SystemExit(f"--experts {experts} is not divisible by the {world} ranks")
        self.topk, self.world, self.local = topk, world, experts // world
        self.experts_total = experts
        torch.manual_seed(0)  # the replicated part, the same on every rank
        self.project = torch.nn.Linear(hidden, hidden)  # what comes before: attention's stand-in
        self.router = torch.nn.Linear(hidden, experts, bias=False)
        torch.manual_seed(1 + rank)  # this rank's experts
        self.experts = torch.nn.ModuleList(
            torch.nn.Sequential(torch.nn.Linear(hidden, 2 * hidden), torch.nn.GELU(),
                                torch.nn.Linear(2 * hidden, hidden))
            for _ in range(self.local))

    def replicated(self) -> list[torch.nn.Parameter]:
        return [*self.project.parameters(), *self.router.parameters()]

    def forward(self, tokens: torch.Tensor) -> tuple[torch.Tensor, list[int]]:
        tokens = self.project(tokens)
        count, hidden = tokens.shape
        weights, chosen = self.router(tokens).softmax(dim=-1).topk(self.topk, dim=-1)
        weights = weights / weights.sum(dim=-1, keepdim=True)
        # token copies sorted by expert, so each destination rank's rows are contiguous
        flat = chosen.reshape(-1)
        order = flat.argsort(stable=True)
        sent = tokens.repeat_interleave(self.topk, dim=0)[order]
        per_expert = torch.bincount(flat, minlength=self.experts_total)
        # 1. counts: how many rows each rank receives from each source, per local expert
        received = torch.empty_like(per_expert)
        dist.all_to_all_single(received, per_expert)
        input_splits = per_expert.view(self.world, self.local).sum(1).tolist()
        from_each = received.view(self.world, self.local)
        output_splits = from_each.sum(1).tolist()
        # 2. dispatch
        arrived = all_to_all(sent, output_splits, input_splits)
        # 3. the local experts, on the rows routed to each (grouped by expert, then back)
        local_ids = torch.arange(self.local).repeat(self.world).repeat_interleave(
            from_each.reshape(-1))
        grouping = local_ids.argsort(stable=True)
        chunks = arrived[grouping].split(from_each.sum(0).tolist())
        done = torch.cat([expert(chunk) for expert, chunk in zip(self.experts, chunks,
                                                                 strict=True)])
        computed = done[grouping.argsort()]
        # 4. combine: the reverse all-to-all, then each token's k results, weighted
        returned = all_to_all(computed, input_splits, output_splits)
        unsorted = returned[order.argsort()].view(count, self.topk, hidden)
        return (unsorted * weights.unsqueeze(-1)).sum(dim=1), input_splits


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--experts", type=int, default=8, help="experts in all (a multiple "
                        "of the ranks)")
    parser.add_argument("--topk", type=int, default=2)
    parser.add_argument("--tokens", type=int, default=64, help="tokens a rank routes a step")
    parser.add_argument("--hidden", type=int, default=32)
    parser.add_argument("--facts", help="write facts-rank-<r>.json here: each dispatch's "
                        "split sizes")
    args = parser.parse_args()

    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    layer = MoELayer(args.hidden, args.experts, args.topk, world, rank)
    optimizer = torch.optim.SGD(layer.parameters(), lr=0.05)
    dispatched, losses = [], []
    for step in range(args.steps):
        generator = torch.Generator().manual_seed(1000 * rank + step)
        tokens = torch.randn(args.tokens, args.hidden, generator=generator)
        target = torch.randn(args.tokens, args.hidden, generator=generator)
        optimizer.zero_grad()
        out, splits = layer(tokens)
        loss = torch.nn.functional.mse_loss(tokens + out, target)
        loss.backward()
        # the replicated part's gradients, averaged in one flat allreduce (a DDP bucket's
        # way); the experts' are each rank's own
        grads = [p.grad for p in layer.replicated()]
        flat = torch.cat([g.reshape(-1) for g in grads])
        dist.all_reduce(flat)
        for grad, averaged in zip(grads, flat.div(world).split([g.numel() for g in grads]),
                                  strict=True):
            grad.copy_(averaged.view_as(grad))
        optimizer.step()
        dispatched.append(splits)
        losses.append(round(loss.item(), 4))
    if args.facts:
        Path(args.facts).mkdir(parents=True, exist_ok=True)
        facts = {"rank": rank, "world": world, "hidden": args.hidden, "topk": args.topk,
                 "experts": args.experts, "tokens": args.tokens, "dispatch_splits": dispatched}
        (Path(args.facts) / f"facts-rank-{rank}.json").write_text(json.dumps(facts))
    print(json.dumps({"rank": rank, "rows_sent_per_rank": dispatched[-1], "loss": losses}),
          flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
