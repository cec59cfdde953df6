"""Registry entry for MAFE-style fair multi-agent environments and F-MACEM."""

from hf_ext._registry import MethodInfo

METHOD = MethodInfo(
    id="mafe",
    name="MAFE",
    title="MAFE: Enabling Equitable Algorithm Design in Multi-Agent Multi-Stage Decision-Making Systems",
    venue="ICML 2026",
    arxiv="2502.18534",
    slot="PettingZoo ParallelEnv",
    use="FMACEM(loan_mafe_v0.parallel_env).fit()",
    host="PettingZoo ParallelEnv (+ torchmetrics fairness Metrics)",
    extras=("pettingzoo",),
    public_extras={
        **dict.fromkeys(
            ("GroupRate", "DemographicParityDifference", "EqualOpportunityDifference", "MeanLevelGap"),
            ("metrics",),
        ),
        **dict.fromkeys(
            (
                "group_rates",
                "demographic_parity_difference",
                "equal_opportunity_difference",
                "mean_level_gap",
            ),
            (),
        ),
    },
    public={
        "LoanMAFE": "hf_ext.mafe.env_loan",
        "HealthcareMAFE": "hf_ext.mafe.env_healthcare",
        "EducationMAFE": "hf_ext.mafe.env_education",
        "MAFEParallelEnv": "hf_ext.mafe.env_base",
        "MAFEVectorEnv": "hf_ext.mafe.vector",
        "LoanConfig": "hf_ext.mafe.config",
        "HealthcareConfig": "hf_ext.mafe.config",
        "EducationConfig": "hf_ext.mafe.config",
        "FMACEM": "hf_ext.mafe.fmacem",
        "ProfitGreedy": "hf_ext.mafe.policies",
        "FixedIntervention": "hf_ext.mafe.policies",
        "GapTriggeredIntervention": "hf_ext.mafe.policies",
        "RandomPolicy": "hf_ext.mafe.policies",
        "ApproveAll": "hf_ext.mafe.policies",
        "ApproveNone": "hf_ext.mafe.policies",
        "ScalarizeFairness": "hf_ext.mafe.wrappers",
        "FairnessConstraint": "hf_ext.mafe.wrappers",
        "ComponentLogger": "hf_ext.mafe.wrappers",
        "SingleAgentView": "hf_ext.mafe.wrappers",
        "FlatInfos": "hf_ext.mafe.wrappers",
        "DiscreteActions": "hf_ext.mafe.wrappers",
        "GroupRate": "hf_ext.metrics.fairness",
        "DemographicParityDifference": "hf_ext.metrics.fairness",
        "EqualOpportunityDifference": "hf_ext.metrics.fairness",
        "MeanLevelGap": "hf_ext.metrics.fairness",
        "group_rates": "hf_ext.metrics.functional.fairness",
        "demographic_parity_difference": "hf_ext.metrics.functional.fairness",
        "equal_opportunity_difference": "hf_ext.metrics.functional.fairness",
        "mean_level_gap": "hf_ext.metrics.functional.fairness",
    },
    citation=(
        "@inproceedings{lazri2026mafe,\n"
        "  title={MAFE: Enabling Equitable Algorithm Design in Multi-Agent Multi-Stage\n"
        "         Decision-Making Systems},\n"
        "  author={Lazri, Zachary McBride and Nakra, Anirudh and Brugere, Ivan and Dervovic, Danial and\n"
        "          Polychroniadou, Antigoni and Huang, Furong and Dachman-Soled, Dana and Wu, Min},\n"
        "  booktitle={International Conference on Machine Learning (ICML)},\n"
        "  year={2026},\n"
        "  eprint={2502.18534},\n"
        "  archivePrefix={arXiv}\n"
        "}"
    ),
    reconstructed=(
        "all environment dynamics, constants and initial distributions "
        "(MAFE-style, not the paper's appendix)",
        "agent names, observation layout and action spaces",
        "fairness component keys and the empty-group convention",
        "intervention mechanisms and a regulator_0 agent that sets their intensity in every environment",
        "reward components: disjoint terms per agent (money, or the health/credit/skill outcome) summing "
        "to its reward",
        "F-MACEM details: policy class, CEM schedule, common random numbers, objective weights, "
        "penalty on the gap of the episode's group means",
        "per-agent F-MACEM objective (hf-ext extension, not in the paper)",
    ),
    note="MAFE-style: same Fair Dec-POMDP formalism and API as the paper, reconstructed dynamics; "
    "no numerical parity with the paper is claimed (no public code).",
)
