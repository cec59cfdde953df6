"""The ``scm_grpo`` benchmark: ``hf-ext bench scm_grpo``."""
