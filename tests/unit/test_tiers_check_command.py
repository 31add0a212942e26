"""`tierlab tiers check` where it cannot run (the agent's check it runs is what the tiers role runs on bringing
tiers up, which the emulated tiers' integration tests read)."""

import pytest

from tierlab.cli import main


def test_tiers_check_under_a_root_without_tiers_says_how_to_bring_them_up(tmp_path):
    with pytest.raises(SystemExit) as done:
        main(["tiers", "check", "--root", str(tmp_path)])
    assert str(done.value) == (f"tierlab tiers: no tiers are up under {tmp_path} (no {tmp_path}/tiers.json or "
                               f"{tmp_path}/agent); run `make tiers` first, or give --root for another tierlab root")
