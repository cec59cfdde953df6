"""Side run, not part of ``hf-ext bench mafe``: F-MACEM beta=5 with the MLP policy class (16 tanh units),
warm-started at the best constant, against that constant on the full run's setting and budgets.

    python -m benchmarks.mafe.mlp_probe --envs healthcare,education --seeds 0,1,2 --init-std 1.0,0.3

For each environment, seed and ``init_std`` it prints one JSON line: the constant's and the MLP's mean
``fair_return`` on the full run's evaluation seeds, the paired 95% CI of their difference, the validated
choice (``start`` = the constant itself) and the training time (the constant search excluded).
"""

from __future__ import annotations

import argparse
import json

from benchmarks.mafe.evaluation import (
    BUDGETS,
    DOMAINS,
    HEADLINE_BETA,
    constant_policies,
    evaluate,
    make_env,
    paired_ci,
    search_constant,
    train,
)
from hf_ext.mafe.fmacem import constant_params


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--envs", default="healthcare")
    parser.add_argument("--seeds", default="0")
    parser.add_argument("--init-std", default="1.0")
    args = parser.parse_args()
    cfg = BUDGETS[False]
    for env_name in args.envs.split(","):
        domain = DOMAINS[env_name]
        for seed in map(int, args.seeds.split(",")):
            seeds = [10_000 * (seed + 1) + i for i in range(cfg["eval_episodes"][env_name])]
            constant, _ = search_constant(domain, cfg, seed)
            env = make_env(domain, domain.primary)
            base = evaluate(env, constant_policies(constant, len(seeds)), seeds, domain.gap)
            init = {
                a: constant_params(env.action_space(a), env.observation_space(a).shape[0], v, kind="mlp")
                for a, v in constant.items()
            }
            for std in map(float, args.init_std.split(",")):
                cem, train_s = train(
                    domain,
                    cfg,
                    HEADLINE_BETA,
                    "team",
                    seed,
                    init_params=init,
                    validation_episodes=cfg["validation_episodes"],
                    policy="mlp",
                    init_std=std,
                )
                res = evaluate(make_env(domain, domain.primary), cem.policies(), seeds, domain.gap)
                scored, chosen = cem.selection_ or ([("final", float("nan"))], 0)
                record = {
                    "env": env_name,
                    "seed": seed,
                    "init_std": std,
                    "constant": float(base["fair"].mean()),
                    "mlp": float(res["fair"].mean()),
                    "ci": paired_ci(res["fair"], base["fair"]),
                    "mlp_return": float(res["return"].mean()),
                    "mlp_gap": float(res["gap"].mean()),
                    "chosen": scored[chosen][0],
                    "validation": {"start": scored[0][1], "best": max(s[1] for s in scored)},
                    "train_s": train_s,
                }
                print(json.dumps(record), flush=True)


if __name__ == "__main__":
    main()
