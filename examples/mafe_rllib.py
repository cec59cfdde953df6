"""Train PPO on the MAFE-style environments with RLlib (CPU, a few minutes for the defaults).

    pip install "hf-ext[rllib]"
    python examples/mafe_rllib.py --env healthcare --iterations 5

One RLlib module per agent (the agents' observation and action spaces differ), all trained on the same
fairness-penalised team reward (``ScalarizeFairness(shared=True)``: every agent receives the sum of the
team's rewards minus ``beta`` times the domain's per-step gap). RLlib's ``ParallelPettingZooEnv`` takes the
environments as they are: ``Box(0, 1, (d,), float32)`` observations, ``Discrete`` or per-group
``MultiDiscrete`` actions (RLlib's default action distributions handle both), float rewards; the nested
component infos are passed through untouched. ``Algorithm.train`` starts a local Ray instance (seconds).
"""

from __future__ import annotations

import argparse
import importlib

GAP = {"loan": "dp_gap", "healthcare": "eo_gap", "education": "dp_gap"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", choices=tuple(GAP), default="loan")
    parser.add_argument(
        "--group-thresholds", action="store_true", help="per-group (MultiDiscrete) thresholds"
    )
    parser.add_argument("--beta", type=float, default=5.0, help="weight of the gap penalty")
    parser.add_argument("--iterations", type=int, default=5)
    parser.add_argument("--max-cycles", type=int, default=50)
    args = parser.parse_args()

    from ray.rllib.algorithms.ppo import PPOConfig
    from ray.rllib.env.wrappers.pettingzoo_env import ParallelPettingZooEnv
    from ray.tune.registry import register_env

    from hf_ext.mafe.wrappers import ScalarizeFairness

    module = importlib.import_module(f"hf_ext.mafe.{args.env}_mafe_v0")

    def make(_config):
        env = module.parallel_env(max_cycles=args.max_cycles, group_thresholds=args.group_thresholds)
        return ParallelPettingZooEnv(
            ScalarizeFairness(env, beta=args.beta, penalty_keys=(GAP[args.env],), shared=True)
        )

    register_env(f"{args.env}_mafe_v0", make)  # Algorithm takes a registered name or a class
    agents = module.parallel_env().possible_agents
    config = (
        PPOConfig()
        .environment(f"{args.env}_mafe_v0")
        .env_runners(num_env_runners=0, rollout_fragment_length=args.max_cycles)
        .learners(num_learners=0)
        .training(train_batch_size_per_learner=8 * args.max_cycles, minibatch_size=2 * args.max_cycles)
        .multi_agent(policies=set(agents), policy_mapping_fn=lambda agent_id, *args, **kwargs: agent_id)
        .rl_module(model_config={"fcnet_hiddens": [64, 64]})
        .debugging(seed=0)
    )
    algo = config.build_algo()
    for i in range(args.iterations):
        result = algo.train()
        # every agent gets the team's fair reward, so the episode return is len(agents) x the team's
        team = result["env_runners"]["episode_return_mean"] / len(agents)
        print(f"iteration {i + 1}: mean team fair return per episode {team:+.3f}")
    algo.stop()


if __name__ == "__main__":
    main()
