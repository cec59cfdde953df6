from hf_ext._registry import MethodInfo

METHOD = MethodInfo(
    id="sysrs",
    name="SySRs",
    title=(
        "Cutting LLM Evaluation Costs with SySRs: A Bandit Algorithm that Provably Exploits Model Similarity"
    ),
    venue="ICML 2026",
    arxiv="2606.07726",
    slot="sklearn model search",
    use="SySRsSearchCV(est, grid).fit(X, y)",
    host="scikit-learn-style estimator + framework-free ask/tell scheduler",
    extras=("sklearn",),
    public={
        "BestModelIdentifier": "hf_ext.sysrs.selector",
        "SySRsSearchCV": "hf_ext.estimators.sysrs",
        "SySRs": "hf_ext.sysrs.core",
        "SynchronizedSuccessiveRejects": "hf_ext.sysrs.core",
        "SuccessiveRejects": "hf_ext.sysrs.core",
        "BestArmScheduler": "hf_ext.sysrs.scheduler",
        "Batch": "hf_ext.sysrs.scheduler",
        "sr_schedule": "hf_ext.sysrs.core",
        "steep_schedule": "hf_ext.sysrs.core",
        "halving_last_phase_schedule": "hf_ext.sysrs.core",
        "SequentialHalving": "hf_ext.sysrs.baselines",
        "UniformAllocation": "hf_ext.sysrs.baselines",
        "sh_schedule": "hf_ext.sysrs.baselines",
        "ALGORITHMS": "hf_ext.sysrs.core",
        "make_scheduler": "hf_ext.sysrs.core",
        "identify_best_model": "hf_ext.sysrs.core",
        "simulate": "hf_ext.sysrs.simulation",
    },
    citation=(
        "@inproceedings{lyu2026sysrs,\n"
        "  title = {Cutting {LLM} Evaluation Costs with {SySRs}: A Bandit Algorithm that Provably Exploits "
        "Model Similarity},\n"
        "  author = {Lyu, Zifan and Nejma, Chahine and Wegel, Tobias and Yang, Fanny and "
        "Dorner, Florian E.},\n"
        "  booktitle = {International Conference on Machine Learning (ICML)},\n"
        "  year = {2026},\n"
        "  eprint = {2606.07726},\n"
        "  archivePrefix = {arXiv}\n"
        "}"
    ),
    reconstructed=(
        "SySRs elimination statistic: lowest mean on the shared queries (paper's exact statistic unknown)",
        "SySRs's default phase lengths: n_k proportional to (K+1-k)^-1.75 (steep_schedule; SR's ^-1 is "
        "schedule='sr')",
        "finite-benchmark rules: counts capped at n_queries, budget >= K*N evaluates everything",
        "zero-size phases eliminate on the data already seen",
        "NaN policies zero / drop_query",
        "synchronized uniform and Sequential Halving baselines",
        "SySRsSearchCV's fit budget: SR's survivor curve over equal-cost phases on growing row subsets "
        "(each row keeps its fold), finalists compared on all rows",
    ),
    note="Only the abstract is public; no figure of the paper is reproduced or quoted.",
)
