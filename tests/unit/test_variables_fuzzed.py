"""Every -e variable given random and adversarial values: each value is either accepted and normalised or refused
with a message naming a variable it was given, never a traceback (a fixed seed; about two seconds)."""

import math
import random
import re

import pytest

from tierlab.catalog.variables import VARIABLES
from tierlab.errors import InputError
from tierlab.runs.observing import validate_observe
from tierlab.runs.settings import validate

ADVERSARIAL = ["", " ", "inf", "-inf", "nan", "NaN", "1e309", "-1", "0", "1", "1.5", "99999999999999999999", "1T",
               "100000T", "1e9", "../../etc", "/etc", "a,b", "None", "none", "true", "yes", "\x00", "\u00e9\u2603",
               "x" * 5000, "0x10", "1_000", " 5 ", "-0", "+3", "1,", ",", "all", "C+O", "16k", "128M", "50%", "150%",
               "-5%", None, True, False, 0, -1, 1, 2**70, 1.5, math.inf, math.nan, [], [1], {}, {"a": 1}]
CHARACTERS = "0123456789.eE+-kKMGTP%,/ab_ "
CASES = 30_000


def value(rng: random.Random):
    kind = rng.randrange(4)
    if kind == 0:
        return rng.choice(ADVERSARIAL)
    if kind == 1:
        return "".join(rng.choice(CHARACTERS) for _ in range(rng.randrange(1, 12)))
    if kind == 2:
        return rng.choice([rng.randint(-10**6, 10**6), rng.random() * 10 ** rng.randrange(-3, 30)])
    return bytes(rng.randrange(256) for _ in range(rng.randrange(1, 8))).decode("latin-1")


# an observation needs to be told how to reach its instance; the fuzzed values may override it
OBSERVED = {"engine": "mariadb", "client_file": "/root/observer.cnf"}


@pytest.mark.parametrize(("check", "given"), [(validate, {}), (validate_observe, OBSERVED)], ids=["run", "observe"])
def test_any_values_are_accepted_or_refused_naming_a_fuzzed_variable(check, given):
    rng = random.Random(20261127)
    names = [variable.name for variable in VARIABLES]
    refused = 0
    for _ in range(CASES):
        values = {name: value(rng) for name in rng.sample(names, rng.randrange(1, 4))}
        try:
            check({**given, **values})
        except InputError as exc:
            refused += 1
            # a fuzzed variable, as a word of its own (trace is not trace_backend, nor tables table_size)
            assert any(re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", str(exc)) for name in values), \
                (values, str(exc))
    # both ways were taken: the generator is not all wrong values, nor all right ones
    assert 0 < refused < CASES
