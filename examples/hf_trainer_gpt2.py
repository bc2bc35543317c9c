"""A Hugging Face Trainer job, for `commbench record` (run it under torchrun): a tiny GPT-2
made from a config (no download), random tokens, DDP on gloo, gradient accumulation.

    commbench record --out results/trace-trainer -- \
        torchrun --nproc-per-node 2 examples/hf_trainer_gpt2.py --steps 5

Trainer steps the optimizer once per ``--accumulation`` micro-batches (DDP skips its
allreduce on the others) and, after the last step, gathers the loss across ranks once: a
tail of communication that is not a step. Rank 0 writes, with ``--facts``, the gradient bytes,
DDP's buckets and the optimizer steps Trainer took, so a recording can be checked against
them. Needs ``transformers`` (and ``accelerate``).
"""

import argparse
import json
import os


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=5, help="optimizer steps")
    parser.add_argument("--accumulation", type=int, default=2)
    parser.add_argument("--batch", type=int, default=4, help="micro-batch per rank")
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--width", type=int, default=64)
    parser.add_argument("--out", default=None, help="Trainer's output_dir (default: a temp dir)")
    parser.add_argument("--facts", help="write gradient bytes, buckets and steps here (JSON)")
    args = parser.parse_args()

    import tempfile

    import torch
    from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments

    torch.manual_seed(0)
    config = GPT2Config(n_layer=args.layers, n_embd=args.width, n_head=2, n_positions=32,
                        vocab_size=256)
    model = GPT2LMHeadModel(config)

    class Tokens(torch.utils.data.Dataset):
        def __len__(self):
            return 4096

        def __getitem__(self, index):
            ids = torch.randint(0, config.vocab_size, (32,),
                                generator=torch.Generator().manual_seed(index))
            return {"input_ids": ids, "labels": ids}

    out = args.out or tempfile.mkdtemp(prefix="commbench-trainer-")
    training = TrainingArguments(
        output_dir=out, max_steps=args.steps, per_device_train_batch_size=args.batch,
        gradient_accumulation_steps=args.accumulation, use_cpu=True, ddp_backend="gloo",
        report_to="none", save_strategy="no", logging_strategy="no", disable_tqdm=True,
        dataloader_num_workers=0, learning_rate=1e-3)
    trainer = Trainer(model=model, args=training, train_dataset=Tokens())
    trainer.train()
    import torch.distributed as dist

    wrapped = trainer.model_wrapped
    logging = wrapped._get_ddp_logging_data() if hasattr(wrapped,
                                                         "_get_ddp_logging_data") else {}
    facts = {
        "gradient_bytes": sum(p.numel() * p.element_size() for p in model.parameters()
                              if p.requires_grad),
        "bucket_bytes": logging.get("rebuilt_bucket_sizes") or logging.get("bucket_sizes"),
        "optimizer_steps": trainer.state.global_step,
        "accumulation": args.accumulation,
    }
    if not dist.is_initialized() or dist.get_rank() == 0:
        print(json.dumps(facts))
        if args.facts:
            with open(args.facts, "w") as handle:
                json.dump(facts, handle)


if __name__ == "__main__":
    os.environ.setdefault("TORCH_CPP_LOG_LEVEL", "ERROR")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    main()
