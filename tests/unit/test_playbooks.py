"""The playbooks run as users type them: from the repository's root and from playbooks/, each place with the
ansible.cfg Ansible finds there."""

import configparser
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# the settings whose values are paths, resolved from the directory of the file that holds them
PATHS = ("inventory", "roles_path", "home", "local_tmp", "strategy_plugins")


def _settings(config: Path) -> dict[str, str]:
    parser = configparser.ConfigParser()
    parser.read(config)
    return {name: str((config.parent / value).resolve()) if name in PATHS else value
            for name, value in parser["defaults"].items()}


def test_the_two_configurations_say_the_same():
    assert _settings(ROOT / "playbooks" / "ansible.cfg") == _settings(ROOT / "ansible.cfg")


def test_every_path_of_the_configuration_is_in_the_repository():
    settings = _settings(ROOT / "ansible.cfg")
    assert [name for name in PATHS if name not in ("home", "local_tmp") and not Path(settings[name]).exists()] == []


def test_every_yaml_file_of_the_playbooks_parses_as_ansible_reads_it():
    # --syntax-check skips the task files a role includes at run time; Ansible's own loader reads them all
    from ansible.parsing.utils.yaml import from_yaml

    unreadable = []
    for path in sorted((ROOT / "playbooks").rglob("*.yml")):
        try:
            from_yaml(path.read_text(), file_name=str(path))
        except Exception as error:  # noqa: BLE001 - each file's error is the finding
            unreadable.append(f"{path.relative_to(ROOT)}: {error}")
    assert unreadable == []
