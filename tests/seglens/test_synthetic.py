"""Synthetic cohorts: shapes, labels, the controlled shift, determinism and bad inputs."""

from __future__ import annotations

import pytest
import torch

from hf_ext.seglens.synthetic import make_cohorts


def test_cohorts_shapes_labels_and_determinism():
    c = make_cohorts(6, 32)
    assert set(c) == {"adult", "pediatric", "ssa", "healthy"}
    for cohort in c.values():
        assert cohort.images.shape == (6, 1, 32, 32) and cohort.masks.shape == (6, 32, 32)
        assert 0 <= cohort.images.min() and cohort.images.max() <= 1
    assert c["healthy"].masks.eq(0).all()
    assert set(c["adult"].masks.unique().tolist()) == {0, 1, 2}
    assert (c["pediatric"].masks > 0).sum() < (c["adult"].masks > 0).sum()
    again = make_cohorts(6, 32)
    assert torch.equal(again["ssa"].images, c["ssa"].images)
    assert len(c["ssa"].subset(slice(0, 2))) == 2 and len(list(c["ssa"].loader(4))) == 2


def test_shift_controls_only_the_acquisition():
    no_shift = make_cohorts(8, 32, cohorts=("ssa",), shift=0.0)["ssa"]
    shifted = make_cohorts(8, 32, cohorts=("ssa",), shift=1.0)["ssa"]
    assert torch.equal(no_shift.masks, shifted.masks)
    assert shifted.images.mean() > no_shift.images.mean() + 0.05  # gamma < 1 brightens


def test_artefact_is_a_grating_on_ssa_only_and_texture_marks_the_lesions():
    plain = make_cohorts(8, 32, cohorts=("adult", "ssa"), shift=0.0)
    art = make_cohorts(8, 32, cohorts=("adult", "ssa"), shift=0.0, artefact=0.2)
    assert torch.equal(plain["adult"].images, art["adult"].images)
    assert torch.equal(plain["ssa"].masks, art["ssa"].masks)
    assert (art["ssa"].images - plain["ssa"].images).abs().mean() > 0.01
    textured = make_cohorts(8, 32, cohorts=("adult",), texture=0.2)["adult"]
    change = (textured.images - plain["adult"].images)[:, 0].abs()
    lesion = plain["adult"].masks > 0
    assert change[lesion].mean() > 5 * change[~lesion].mean()


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"n_per_cohort": 0}, "n_per_cohort"),
        ({"size": 40}, "size"),
        ({"cohorts": ("adult", "teen")}, r"cohorts\[1\]"),
        ({"shift": -1.0}, "shift"),
        ({"random_state": -1}, "random_state"),
        ({"texture": -0.1}, "texture"),
        ({"artefact": 1.5}, "artefact"),
        ({"contrast": 3.0}, "contrast"),
    ],
)
def test_bad_inputs_name_the_argument(kwargs, name):
    with pytest.raises(ValueError, match=f"`{name}`"):
        make_cohorts(**{"n_per_cohort": 2, "size": 32, **kwargs})
