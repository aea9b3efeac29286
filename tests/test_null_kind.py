"""The null as one value (rmtbase.stats.null_kind): parsing with one-line errors, equality and
hashing, what each null tests, its element draws, the descriptions the files carry, the
registry the classes fill and the capabilities read as attributes."""

from __future__ import annotations

import pytest

from rmtbase.errors import InputError
from rmtbase.stats.null_kind import NULLS, GaussianNull, Null, PermutationNull

GAUSS = "i.i.d. N(0, sigma^2) entries at each head's own (d, d_h, sigma_Q, sigma_K)"
PERM = ("each head's own entries, shuffled: W_Q and W_K each permuted uniformly at random and "
        "independently (tests structure beyond the entry law; element statistics of W_Q and W_K "
        "left out)")


def test_parse_names_and_values():
    assert NULLS == ("gaussian", "permutation")
    assert Null.parse("gaussian") == GaussianNull() == GaussianNull("float32")
    assert Null.parse("gaussian", storage="q4_k") == GaussianNull("q4_k")
    assert Null.parse("permutation") == PermutationNull()
    assert Null.parse("permutation", storage="float16") == PermutationNull()
    null = GaussianNull("bfloat16")
    assert Null.parse(null) is null
    for name in NULLS:
        assert str(Null.parse(name)) == Null.parse(name).name == name


@pytest.mark.parametrize("text", ["Gaussian", "perm", "", None, 3])
def test_parse_refuses_other_names_in_one_line(text):
    with pytest.raises(InputError) as exc:
        Null.parse(text)
    assert str(exc.value) == f"null must be one of gaussian, permutation, got {text!r}"


@pytest.mark.parametrize("storage", ["float64", "Q4_K", "", None])
def test_gaussian_refuses_unknown_storage(storage):
    with pytest.raises(InputError, match="^storage must be one of float32, float16, bfloat16"):
        GaussianNull(storage)


def test_frozen_hashable_distinct():
    nulls = {GaussianNull(), GaussianNull("float32"), GaussianNull("float16"), PermutationNull(),
             PermutationNull()}
    assert nulls == {GaussianNull(), GaussianNull("float16"), PermutationNull()}
    assert GaussianNull() != PermutationNull()
    assert GaussianNull() != "gaussian"  # a value, not its spelling
    with pytest.raises(AttributeError):
        GaussianNull().storage = "float16"


def test_what_each_null_tests():
    g, p = GaussianNull("q8_0"), PermutationNull()
    assert g.tests_entry_law and not p.tests_entry_law
    assert all(g.enters(x) for x in ("entry law", "product law", "spectrum"))
    assert not p.enters("entry law")
    assert p.enters("product law") and p.enters("spectrum")
    assert not g.per_head and p.per_head


def test_in_family_takes_the_value():
    from rmtbase.decision.family import NULLS as FAMILY_NULLS
    from rmtbase.decision.family import in_family

    assert FAMILY_NULLS == NULLS
    names = ["q.mean", "k.kurtosis", "qk.kurtosis", "qk.npr", "qk.pr", "q.rms"]
    assert in_family(names) == in_family(names, null=GaussianNull("float16")) == \
        ["q.mean", "k.kurtosis", "qk.kurtosis", "qk.npr"]
    assert in_family(names, null=PermutationNull()) == ["qk.kurtosis", "qk.npr"]
    # the text is parsed where it enters (Null.parse), not by in_family
    with pytest.raises(InputError, match="^null must be one of"):
        Null.parse("uniform")


def test_element_draws():
    from rmtbase.scoring.nulls.checks import MIN_ELEMENT_DRAWS, check_element_draws

    p, g = PermutationNull(), GaussianNull()
    assert p.min_element_draws == MIN_ELEMENT_DRAWS == 20 and g.min_element_draws == 0
    assert p.needs_element_draws("all") and p.needs_element_draws("elementwise")
    assert not p.needs_element_draws("spectral")
    assert not any(g.needs_element_draws(k) for k in ("all", "spectral", "elementwise"))
    check_element_draws(g, "all", 0)
    check_element_draws(p, "spectral", 0)
    check_element_draws(p, "all", 20)
    with pytest.raises(InputError) as exc:
        check_element_draws(p, "all", 19, "--element-draws")
    assert str(exc.value) == (
        "--element-draws 19 is too few: the permutation null's per-head decision needs at "
        "least 20 permutations with W_QK's element statistics (use --stats spectral to leave "
        "them out)")


def test_descriptions_as_the_files_carry_them():
    from rmtbase.scoring.description import null_description

    assert PermutationNull().description() == PERM
    assert GaussianNull().description() == GAUSS
    assert GaussianNull("float16").description() == \
        GAUSS + ", rounded to float16 like the checkpoint"
    assert GaussianNull("bfloat16").description() == \
        GAUSS + ", rounded to bfloat16 like the checkpoint"
    assert GaussianNull("q4_k").description() == \
        GAUSS + ", passed through the q4_k block quantiser like the checkpoint"
    assert GaussianNull("q4_k").stored_as() == "passed through the q4_k block quantiser"
    assert GaussianNull().stored_as() == "float32"
    # the sentences of scores.nc's ``null`` attr
    assert null_description(PermutationNull(), "float16", None, "auto") == PERM
    assert null_description(PermutationNull(), ["q4_k", "q6_k"], ["q4_k", "q6_k"], "auto",
                            [0, 1]) == PERM
    assert null_description(GaussianNull(), "float32", None, "auto") == GAUSS
    assert null_description(GaussianNull(), "float32", "q4_0", "none") == (
        GAUSS + "; the weights look dequantised from q4_0 but the null is not: histogram "
        "statistics are left out of the decision")
    assert null_description(GaussianNull(), ["q4_k", "q4_k", "q6_k", "float32"],
                            ["q4_k", "q4_k", "q6_k", "q8_0+q4_k"], "auto", [0, 1, 2, 3]) == (
        GAUSS + ", each layer stored as the checkpoint stores it: passed through the q4_k block "
        "quantiser (layers 0-1); passed through the q6_k block quantiser (layer 2); float32 "
        "(layer 3); layer 3 looks dequantised from q4_k+q8_0 but its null is not: histogram "
        "statistics are left out of the decision")


def test_the_registry_is_filled_by_the_classes():
    """A concrete subclass naming itself registers when defined; an abstract one, or
    a variant keeping its parent's name, does not; NULLS is a live view of the names."""
    from dataclasses import dataclass
    from typing import ClassVar

    from rmtbase.stats.null_kind import unregister
    from rmtbase.stats.null_registry import REGISTRY

    before = dict(REGISTRY)

    @dataclass(frozen=True)
    class Abstract(Null):  # no reference: abstract, not registered
        name: ClassVar[str] = "abstract-test"

        def description(self) -> str:
            return "x"

    @dataclass(frozen=True)
    class Variant(GaussianNull):  # keeps "gaussian": a variant, not registered
        pass

    assert REGISTRY == before and Null.parse("gaussian") == GaussianNull()

    @dataclass(frozen=True)
    class Sign(PermutationNull):
        """Signs flipped."""

        name: ClassVar[str] = "sign-test"

    try:
        assert "sign-test" in NULLS and NULLS[-1] == "sign-test" and len(NULLS) == 3
        assert Null.parse("sign-test") == Sign() and Null.parse("sign-test").per_head
        with pytest.raises(InputError, match="^null must be one of gaussian, permutation, "
                                             "sign-test, got 'x'$"):
            Null.parse("x")
    finally:
        unregister("sign-test")
    assert NULLS == ("gaussian", "permutation") and "sign-test" not in NULLS
    with pytest.raises(InputError, match="cannot be unregistered"):
        unregister("gaussian")
    assert Variant("float16").storage == "float16" and Abstract is not None


def test_capabilities_are_attributes():
    g, p = GaussianNull(), PermutationNull()
    assert g.stored_like_checkpoint and not p.stored_like_checkpoint
    assert g.scores_components and g.scores_deltas
    assert not p.scores_components and not p.scores_deltas
    assert (g.composition_draws, p.composition_draws) == (18_000, 1000)
    assert g.at_storage("q4_k") == GaussianNull("q4_k") and p.at_storage("q4_k") is p
    assert p.storage == "float32"
    g.require("scores_deltas", "--base")
    with pytest.raises(InputError) as exc:
        p.require("scores_deltas", "--base")
    assert str(exc.value) == ("--base needs a null with scores_deltas; the permutation null "
                              "has none (PermutationNull.scores_deltas = False)")
    assert g.composition_label("bfloat16") == "independent Gaussian factors (bfloat16)"
    assert p.composition_label("float32") == "permutation (each factor's entries shuffled)"


def test_a_null_carrying_a_storage_is_refused_not_ignored():
    from rmtbase.scoring.nulls.checks import check_null_storage

    check_null_storage(GaussianNull())
    check_null_storage(PermutationNull())
    with pytest.raises(InputError) as exc:
        check_null_storage(GaussianNull("q8_0"))
    assert str(exc.value) == (
        "null GaussianNull(storage='q8_0') carries storage 'q8_0', which is not honoured: the "
        "null is stored as each layer of the checkpoint is; pass GaussianNull() (quantized_null "
        "forces a block format on quantised layers)")


def test_composition_report_names_the_files_null_through_the_registry():
    import xarray as xr

    from rmtbase.report.composition_report import _null_label

    def label(**attrs):
        return _null_label(xr.Dataset(attrs=attrs))

    assert label() == "independent Gaussian factors (float32)"
    assert label(null_kind="gaussian", null_storage="bfloat16") == \
        "independent Gaussian factors (bfloat16)"
    assert label(null_kind="permutation", null_storage="entries permuted") == \
        "permutation (each factor's entries shuffled)"
    assert label(null_kind="someone-elses") == "someone-elses"  # not registered here
