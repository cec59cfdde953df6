import pytest

from hf_ext.grounding_ids.synthetic import vocabulary


@pytest.fixture(scope="module")
def vlm64():
    """The verified tiny LLaVA: 64 px, patch 8, CLS kept (65 image tokens), eager attention."""
    from hf_ext.grounding_ids.model import tiny_grounding_vlm

    return tiny_grounding_vlm(vocabulary(4), image_size=64, hidden_size=32)
