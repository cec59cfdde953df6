"""The model zoo's training blocks: parallel over joblib workers with the one-worker result; bad settings."""

from __future__ import annotations

import numpy as np
import pytest

from hf_ext.mvprobe.zoo import make_model_zoo

SMALL = {"n_models": 6, "finetune_steps": (3, 8), "ancestor_steps": 5}


@pytest.mark.distributed
@pytest.mark.parametrize("arch", ["mlp", "cnn"])
def test_blocks_on_two_workers_equal_one_worker(arch):
    one = make_model_zoo(arch=arch, block_size=4, n_jobs=1, **SMALL)
    two = make_model_zoo(arch=arch, block_size=4, n_jobs=2, **SMALL)
    np.testing.assert_array_equal(one.weights, two.weights)
    np.testing.assert_array_equal(one.hparams["accuracy"], two.hparams["accuracy"])


def test_blocks_have_their_own_batch_streams():
    whole = make_model_zoo(**SMALL).weights
    assert np.array_equal(whole, make_model_zoo(block_size=6, **SMALL).weights)  # one block: one stream
    blocks = make_model_zoo(block_size=3, **SMALL).weights
    assert not np.array_equal(whole[3:], blocks[3:])  # the second block samples from its own stream


def test_cache_keys_by_block_size(tmp_path):
    make_model_zoo(cache_dir=tmp_path, **SMALL)
    make_model_zoo(block_size=3, cache_dir=tmp_path, **SMALL)
    assert len(list(tmp_path.glob("zoo_mlp_6_*.npz"))) == 2


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [({"block_size": 0}, "`block_size`"), ({"n_jobs": 0}, "`n_jobs`"), ({"n_jobs": 1.5}, "`n_jobs`")],
)
def test_bad_settings(kwargs, match):
    with pytest.raises((ValueError, TypeError), match=match):
        make_model_zoo(**SMALL, **kwargs)
