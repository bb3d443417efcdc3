"""backplane.manual_seed and backplane.initial_seed (python/src/random.cc):
the generator of the random operators, seeded from Python."""
import pytest

import backplane


def test_initial_seed_is_the_seed_given_to_manual_seed():
    backplane.manual_seed(1234)
    assert backplane.initial_seed() == 1234
    backplane.manual_seed(2**64 - 1)  # the whole uint64 range is a seed
    assert backplane.initial_seed() == 2**64 - 1


@pytest.mark.skipif(not hasattr(backplane.Tensor, "numpy"), reason="needs Tensor.numpy to read the values")
def test_manual_seed_repeats_the_draws_after_it():
    backplane.manual_seed(7)
    first = backplane.randn((3, 4)).numpy().tolist()
    more = backplane.rand((5,)).numpy().tolist()
    backplane.manual_seed(7)
    assert backplane.randn((3, 4)).numpy().tolist() == first
    assert backplane.rand((5,)).numpy().tolist() == more
    backplane.manual_seed(8)
    assert backplane.randn((3, 4)).numpy().tolist() != first


@pytest.mark.parametrize("seed", [-1, 2**64])
def test_manual_seed_out_of_range_is_a_value_error(seed):
    with pytest.raises(ValueError, match=r"seed must be in \[0, 2\*\*64\), got " + str(seed)):
        backplane.manual_seed(seed)


@pytest.mark.parametrize("seed", [1.5, "3", True, None])
def test_manual_seed_takes_only_an_int(seed):
    with pytest.raises(TypeError, match="manual_seed\\(\\): seed must be an int, not " + type(seed).__name__):
        backplane.manual_seed(seed)
