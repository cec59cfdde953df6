"""Train on the MAFE-style environments with the MARL libraries people use (CPU, seconds).

    pip install "hf-ext[marl-libs]"
    python examples/mafe_marl_libs.py --env loan --group-thresholds

- SuperSuit + Stable-Baselines3: ``DiscreteActions`` turns per-group thresholds (``MultiDiscrete``) into one
  ``Discrete`` index so that SuperSuit's padding wrappers accept every agent, then PPO trains one shared
  policy on the fairness-penalised team reward (``ScalarizeFairness``).
- torchrl: ``FlatInfos`` gives typed flat infos that ``PettingZooWrapper`` turns into tensors; the rollout
  carries each group's observations, the global state and every reward and fairness component.
"""

from __future__ import annotations

import argparse
import importlib


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", choices=("loan", "healthcare", "education"), default="loan")
    parser.add_argument(
        "--group-thresholds", action="store_true", help="per-group (MultiDiscrete) thresholds"
    )
    parser.add_argument("--beta", type=float, default=5.0, help="weight of the dp_gap penalty")
    parser.add_argument("--timesteps", type=int, default=2048)
    args = parser.parse_args()

    import supersuit as ss
    from stable_baselines3 import PPO
    from torchrl.envs.libs.pettingzoo import PettingZooWrapper

    from hf_ext.mafe.wrappers import DiscreteActions, FlatInfos, ScalarizeFairness

    module = importlib.import_module(f"hf_ext.mafe.{args.env}_mafe_v0")

    def make(max_cycles: int):
        return module.parallel_env(max_cycles=max_cycles, group_thresholds=args.group_thresholds)

    # SuperSuit + Stable-Baselines3: one PPO policy shared by all agents (parameter sharing)
    env = ScalarizeFairness(make(50), beta=args.beta, penalty_keys=("dp_gap",), shared=True)
    env = ss.pad_observations_v0(ss.pad_action_space_v0(DiscreteActions(env)))
    venv = ss.concat_vec_envs_v1(ss.pettingzoo_env_to_vec_env_v1(env), 4, base_class="stable_baselines3")
    model = PPO("MlpPolicy", venv, n_steps=128, batch_size=128, device="cpu", verbose=0)
    model.learn(total_timesteps=args.timesteps)
    print(f"PPO trained for {args.timesteps} agent-steps on {args.env}")

    # torchrl: typed infos and the global state as tensors
    tenv = PettingZooWrapper(FlatInfos(make(10)), return_state=True, seed=0)
    td = tenv.rollout(10)
    for group in tenv.group_map:
        gap = td["next", group, "info", "fairness_components/dp_gap"]
        print(
            f"torchrl rollout, group {group!r}: observation {tuple(td['next', group, 'observation'].shape)}, "
            f"mean dp_gap {gap.mean():.3f} (random actions)"
        )
    print(f"state {tuple(td['next', 'state'].shape)}")


if __name__ == "__main__":
    main()
