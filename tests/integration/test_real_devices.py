"""Real devices, as a user with real hardware has them: two tiers with no emulation, each a plain loop device on this
machine's disk that tierlab formats and mounts. playbooks/devices.yml measures them and fits a profile to each; a
traced TPC-H run on them is judged by the contract with those profiles, and recommend predicts from them, with the
statements that move the tables between the two devices."""

import json
import shutil
from pathlib import Path

import pytest
from lab import Lab, cli, command, read_csv, remove_torn_down_root

from tierlab.devices.profiles import load

ROOT = "/var/lib/tierlab-test-real"
# the devices' backing files, outside the root: the test makes and removes them, tierlab only formats the devices
BACKING = Path("/var/tmp/tierlab-test-real-devices")
DEVICES = {"fastdev": ("fast", 1 << 30), "capdev": ("capacity", 2 << 30)}
# the contract's rules that need the device's profile: where it saturates, what random reads cost, its collection
PROFILED_RULES = ("low request scale", "random access is only half-bad", "forget garbage collection")

pytestmark = pytest.mark.mariadb


@pytest.fixture(scope="module")
def real_devices(tmp_path_factory):
    """The two loop devices and a lab whose tiers they are; torn down after, the devices detached and their files
    removed."""
    BACKING.mkdir(exist_ok=True)
    loops = []
    try:
        tiers = []
        for name, (role, size) in DEVICES.items():
            image = BACKING / f"{name}.img"
            with open(image, "wb") as backing:
                backing.truncate(size)
            attached = command(["losetup", "--find", "--show", str(image)], "losetup", 60)
            assert attached.returncode == 0, attached.stderr
            loops.append(attached.stdout.strip())
            tiers.append({"name": name, "role": role, "emulation": "none", "device": loops[-1], "format": True,
                          "path": f"{ROOT}/tiers/{name}", "read_ahead_kb": 128})
        lab = Lab(tmp_path_factory.mktemp("real-results"), root=ROOT, tiers=tiers,
                  mysql_port_base={"mariadb": 3700, "mysql": 3800}, postgresql_port=5517)
        try:
            before = lab.run_ids()
            lab.playbook("devices.yml", devices_runtime_s=0.3, devices_sustained_s=2)
            (measured,) = [lab.results_dir / name for name in lab.run_ids() - before]
            yield {"lab": lab, "devices_dir": measured, "run": lab.run("C+O")}
        finally:
            lab.playbook("teardown.yml", purge=True)
            remove_torn_down_root(ROOT)
    finally:
        for loop in loops:
            command(["losetup", "--detach", loop], "losetup", 60)
        shutil.rmtree(BACKING)


def profiles_option(devices_dir: Path) -> str:
    return f"fast={devices_dir / 'profiles' / 'fastdev.toml'},capacity={devices_dir / 'profiles' / 'capdev.toml'}"


def test_the_device_suite_fits_a_profile_to_each_real_device(real_devices):
    for name in DEVICES:
        profile = load(real_devices["devices_dir"] / "profiles" / f"{name}.toml")
        assert 0 < profile["read_random_us"] < 100_000, profile
        assert 0 < profile["read_sequential_us"] <= profile["read_random_us"] * 1.5, profile


def test_the_run_on_real_devices_is_traced_on_them_and_records_no_device_model(real_devices):
    manifest = json.loads((real_devices["run"] / "manifest.json").read_text())
    assert {t["name"]: (t["emulation"], t["profile"]) for t in manifest["tiers"]} == {
        "fastdev": ("none", None), "capdev": ("none", None)}
    queries = read_csv(real_devices["run"] / "tables" / "queries.csv")
    assert set(queries["status"]) == {"ok"} and queries["trace_complete"].all()


def test_the_contract_judges_the_real_devices_by_the_fitted_profiles(real_devices):
    run = real_devices["run"]
    unprofiled = read_csv(run / "tables" / "contract.csv")
    rules = unprofiled[unprofiled["rule"].isin(PROFILED_RULES)]
    assert set(rules["verdict"]) == {"not judged"}
    done = cli("analyze", str(run), "--profiles", profiles_option(real_devices["devices_dir"]), timeout_s=600)
    assert done.returncode == 0, done.stderr
    profiled = read_csv(run / "tables" / "contract.csv")
    rules = profiled[profiled["rule"].isin(PROFILED_RULES)]
    assert not rules["evidence"].str.contains("no device profile").any()
    # q01 scans lineitem on the capacity device: requests enough for every rule
    scan = rules[(rules["query"] == "q01") & (rules["tier"] == "capdev")]
    assert list(scan["rule"]) == list(PROFILED_RULES) and set(scan["verdict"]) <= {"kept", "broken"}


def test_recommend_predicts_from_the_fitted_profiles_and_moves_the_tables_between_the_real_devices(real_devices,
                                                                                                  tmp_path):
    run = real_devices["run"]
    without = cli("recommend", str(run), "--fast-capacity", "8M")
    assert without.returncode != 0
    assert "has no device model (a real device): give --profiles fast=PROFILE,capacity=PROFILE" in without.stderr
    done = cli("recommend", str(run), "--fast-capacity", "8M", "--profiles",
               profiles_option(real_devices["devices_dir"]), "--out", str(tmp_path), "--json", timeout_s=600)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert sorted(e["query"] for e in result["evidence"]) == ["q01", "q03"]
    # the traced layout is predicted at its measured time, whatever the profiles
    assert result["traced_predicted_s"] == pytest.approx(result["traced_s"], rel=1e-6)
    # the other layouts by the fitted profiles: with the emulated tiers' models (optane ten times nand's speed) in
    # their place, every table on the fast tier is predicted otherwise
    modelled = cli("recommend", str(run), "--fast-capacity", "8M", "--profiles", "fast=optane,capacity=nand",
                   "--out", str(tmp_path / "modelled"), timeout_s=600)
    assert modelled.returncode == 0, modelled.stderr
    fitted_s, modelled_s = (read_csv(out / "layouts.csv").set_index("layout")["predicted_s"]
                            for out in (tmp_path, tmp_path / "modelled"))
    assert abs(fitted_s["ALL"] / modelled_s["ALL"] - 1) > 0.05, (fitted_s["ALL"], modelled_s["ALL"])
    plan = result["migration"]["plan"]
    assert plan["tiers"] == {"fast": f"DATA DIRECTORY {ROOT}/tiers/fastdev/mariadb-16k/tables",
                             "capacity": f"DATA DIRECTORY {ROOT}/tiers/capdev/mariadb-16k/tables"}
    assert (tmp_path / "migration.sh").exists() and (tmp_path / "migration-undo.sh").exists()
