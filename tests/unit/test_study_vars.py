import pytest

from tierlab.errors import StudyInputError
from tierlab.layout import parse_layout
from tierlab.study_vars import buffer_pool_bytes, check_fit, validate

DEFAULTS = {
    "engine": "mariadb", "layout": "C+O", "scale_factor": "0.1", "queries": "all", "page_size": "16k",
    "buffer_pool": "5%", "query_timeout_s": "1800", "tries": "1", "cold": "True", "trace": "True",
    "trace_backend": "auto", "io_threads": "4", "flush_method": "O_DIRECT", "read_ahead_threshold": "56",
    "random_read_ahead": "False", "system_tier": "capacity", "resume": "",
}


def study(**changes):
    return validate({**DEFAULTS, **changes})


def test_defaults_normalize_to_typed_values():
    result = study()
    assert result["scale_factor"] == 0.1
    assert result["layout"] == "C+O"
    assert result["queries"][0] == "q01" and result["queries"][-1] == "q22" and len(result["queries"]) == 22
    assert result["page_size_bytes"] == 16384
    assert result["cold"] is True
    assert result["buffer_pool"] == {"percent": 5.0}


@pytest.mark.parametrize("value", ["2k", "16", "128k", "16kb"])
def test_bad_page_size_names_the_allowed_sizes(value):
    with pytest.raises(StudyInputError) as err:
        study(page_size=value)
    assert str(err.value) == f"page_size={value!r} is not allowed; allowed: 4k, 8k, 16k, 32k, 64k (or the same in bytes)"


def test_page_size_in_bytes_is_accepted():
    assert study(page_size="8192")["page_size"] == "8k"


@pytest.mark.parametrize("value", ["0", "-1", "abc", "nan"])
def test_scale_factor_must_be_positive(value):
    with pytest.raises(StudyInputError, match=r"scale_factor=.* is not allowed; allowed: a number > 0"):
        study(scale_factor=value)


def test_queries_subset_keeps_the_given_order():
    assert study(queries="3,10,16")["queries"] == ["q03", "q10", "q16"]


@pytest.mark.parametrize("value", ["0", "23", "3,x", ""])
def test_queries_out_of_range_are_refused(value):
    with pytest.raises(StudyInputError, match="allowed: all, or query numbers 1 to 22"):
        study(queries=value)


def test_repeated_query_is_refused():
    with pytest.raises(StudyInputError, match="Query 3 is given more than once"):
        study(queries="3,10,3")


def test_buffer_pool_takes_a_size():
    assert study(buffer_pool="256M")["buffer_pool"] == {"bytes": 256 << 20}


@pytest.mark.parametrize("value", ["0%", "101%", "lots", "0"])
def test_bad_buffer_pool_is_refused(value):
    with pytest.raises(StudyInputError, match="buffer_pool="):
        study(buffer_pool=value)


def test_buffer_pool_percentage_has_a_floor_of_256_pages():
    assert buffer_pool_bytes({"percent": 1.0}, 0.01, 65536) == 256 * 65536


def test_unknown_engine_is_refused():
    with pytest.raises(StudyInputError, match="engine='postgres' is not allowed; allowed: mariadb, mysql"):
        study(engine="postgres")


def test_layout_that_does_not_fit_shows_the_sizes():
    with pytest.raises(StudyInputError) as err:
        check_fit(parse_layout("L+O"), 10, 6 << 30)
    assert str(err.value) == (
        "layout 'O+L' at scale_factor=10 needs about 15.87 GiB on the fast tier (lineitem 13.23 GiB, orders 2.64 GiB), "
        "but the fast tier holds 5.40 GiB usable of 6.00 GiB; choose fewer tables, a smaller scale_factor, "
        "or a larger fast tier"
    )


def test_layout_that_fits_passes():
    check_fit(parse_layout("ALL"), 1, 6 << 30)


def test_validate_checks_the_fit_when_the_fast_tier_size_is_known():
    with pytest.raises(StudyInputError, match="does not fit|needs about"):
        validate({**DEFAULTS, "layout": "ALL", "scale_factor": "100"}, 6 << 30)
