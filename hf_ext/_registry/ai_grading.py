from hf_ext._registry import MethodInfo

METHOD = MethodInfo(
    id="ai_grading",
    name="AI grading",
    title=(
        "Evaluating AI Grading on Real-World Handwritten College Mathematics: "
        "A Large-Scale Study Toward a Benchmark"
    ),
    venue="ICML 2026",
    arxiv="2603.00895",
    slot="transformers LM + metrics",
    use="RubricGrader(backend).grade(submission, quiz)",
    host="transformers causal/chat LMs or an OpenAI-compatible URL (grading pipeline) + torchmetrics",
    extras=("transformers", "metrics"),
    public={
        "GradingConfig": "hf_ext.ai_grading.config",
        "RubricItem": "hf_ext.ai_grading.core",
        "Question": "hf_ext.ai_grading.core",
        "Quiz": "hf_ext.ai_grading.core",
        "GradeResult": "hf_ext.ai_grading.core",
        "GradeParseError": "hf_ext.ai_grading.core",
        "rubric_messages": "hf_ext.ai_grading.core",
        "parse_grade_output": "hf_ext.ai_grading.core",
        "aggregate_runs": "hf_ext.ai_grading.core",
        "OCRResult": "hf_ext.ai_grading.ocr",
        "IdentityOCR": "hf_ext.ai_grading.ocr",
        "CallableOCR": "hf_ext.ai_grading.ocr",
        "PipelineOCR": "hf_ext.ai_grading.ocr",
        "TransformersBackend": "hf_ext.ai_grading.backends",
        "OpenAICompatibleBackend": "hf_ext.ai_grading.backends",
        "CallableBackend": "hf_ext.ai_grading.backends",
        "GradeGrammar": "hf_ext.ai_grading.constrained",
        "GradeLogitsProcessor": "hf_ext.ai_grading.constrained",
        "GradeDecoding": "hf_ext.ai_grading.constrained",
        "decode_grade": "hf_ext.ai_grading.constrained",
        "compact_reply": "hf_ext.ai_grading.constrained",
        "RubricGrader": "hf_ext.ai_grading.pipeline",
        "GradeReport": "hf_ext.ai_grading.pipeline",
        "Submission": "hf_ext.ai_grading.pipeline",
        "EvaluationProtocol": "hf_ext.ai_grading.report",
        "make_calculus_quiz": "hf_ext.ai_grading.synthetic",
        "simulate_student": "hf_ext.ai_grading.synthetic",
        "NoisyOCR": "hf_ext.ai_grading.synthetic",
        "SympyRubricEngine": "hf_ext.ai_grading.synthetic",
        "SympyRubricBackend": "hf_ext.ai_grading.synthetic",
        "GradingAgreement": "hf_ext.metrics.grading",
        "RunStability": "hf_ext.metrics.grading",
        "grading_agreement": "hf_ext.metrics.functional.grading",
        "quadratic_weighted_kappa": "hf_ext.metrics.functional.grading",
        "run_stability": "hf_ext.metrics.functional.grading",
        "deferral_curve": "hf_ext.metrics.functional.grading",
        "qwk_scorer": "hf_ext.metrics.functional.grading",
    },
    public_extras={
        "GradingConfig": (),
        "RubricItem": (),
        "Question": (),
        "Quiz": (),
        "GradeResult": (),
        "GradeParseError": (),
        "rubric_messages": (),
        "parse_grade_output": (),
        "aggregate_runs": (),
        "OCRResult": (),
        "IdentityOCR": (),
        "CallableOCR": (),
        "OpenAICompatibleBackend": (),
        "CallableBackend": (),
        "GradeGrammar": (),
        "GradeDecoding": (),
        "compact_reply": (),
        "GradeLogitsProcessor": ("transformers",),
        "decode_grade": ("transformers",),
        "RubricGrader": (),
        "GradeReport": (),
        "Submission": (),
        "make_calculus_quiz": (),
        "simulate_student": (),
        "NoisyOCR": (),
        "SympyRubricEngine": (),
        "SympyRubricBackend": (),
        "EvaluationProtocol": ("metrics",),
        "PipelineOCR": ("transformers",),
        "TransformersBackend": ("transformers",),
        "GradingAgreement": ("metrics",),
        "RunStability": ("metrics",),
        "grading_agreement": ("metrics",),
        "quadratic_weighted_kappa": ("metrics",),
        "run_stability": ("metrics",),
        "deferral_curve": ("metrics",),
        "qwk_scorer": ("metrics", "sklearn"),
    },
    citation=(
        "@inproceedings{yu2026aigrading,\n"
        "  title     = {Evaluating {AI} Grading on Real-World Handwritten College Mathematics: "
        "A Large-Scale Study Toward a Benchmark},\n"
        "  author    = {Yu and Liu and Mao and Liu and Chen and Xin and Yu},\n"
        "  booktitle = {Proceedings of the 43rd International Conference on Machine Learning (ICML)},\n"
        "  year      = {2026},\n"
        "  note      = {arXiv:2603.00895}\n"
        "}"
    ),
    reconstructed=(
        "the prompt wording, the JSON output schema and the strict validation rules",
        "the deferral triggers and their thresholds (run spread 1.0 point, OCR confidence 0.6)",
        "the aggregation alternatives to the paper's max rule (median, mean, min; total or item level)",
        "the statistics of the multi-perspective protocol (QWK binning, bootstrap intervals, "
        "failure-mode tags)",
        "the synthetic calculus quiz, its simulated students, the OCR-noise model and the sympy "
        "rubric engine",
    ),
    note=(
        "An evaluation and system paper without public code or data: the pipeline stages and the max "
        "rule come from it, every interface, prompt, threshold and the synthetic data are hf-ext's. "
        "The synthetic benchmark checks the metrics and the pipeline, not the grading quality of a real LLM."
    ),
)
