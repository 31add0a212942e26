"""`tierlab compare` warns when the runs it puts side by side ran with different versions of what they measure."""

from tierlab.report.compare import version_differences


def manifest(engine: str, version: str, kernel: str = "6.1.0", tierlab: str = "abc") -> dict:
    return {"engine": {"name": engine, "version": version}, "host": {"kernel": kernel}, "versions": {"tierlab": tierlab}}


def test_runs_of_one_engine_at_two_versions_are_warned_of_with_the_runs_of_each():
    assert version_differences({"r1": manifest("mysql", "8.4.7"), "r2": manifest("mysql", "8.4.8"),
                                "r3": manifest("mysql", "8.4.7")}) == [
        "the runs differ in mysql version: 8.4.7 (r1, r3); 8.4.8 (r2)"]


def test_runs_of_two_engines_are_not_warned_of_but_a_kernel_and_tierlab_that_differ_are():
    assert version_differences({"r1": manifest("mariadb", "10.11.19"), "r2": manifest("postgresql", "15.14",
                                                                                     kernel="6.12.0", tierlab="def")}) == [
        "the runs differ in kernel: 6.1.0 (r1); 6.12.0 (r2)", "the runs differ in tierlab: abc (r1); def (r2)"]


def test_runs_alike_are_not_warned_of():
    assert version_differences({"r1": manifest("mariadb", "10.11.19"), "r2": manifest("mariadb", "10.11.19")}) == []
