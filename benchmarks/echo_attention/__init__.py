"""The ``echo_attention`` benchmark: ``hf-ext bench echo_attention``."""
