"""One exception type per user-facing failure class."""


class TierlabError(Exception):
    """Base of every error tierlab reports to a user."""


class InputError(TierlabError):
    """A value the user gave (a run's -e variable, a study file, a command's argument) is not allowed; nothing
    has been touched yet."""


class TraceFormatError(TierlabError):
    """A trace file is truncated, corrupt or not of the expected format."""


class RunDirError(TierlabError):
    """A results directory is missing files it must have, or is not a run at all."""


class DeviceProfileError(TierlabError):
    """A device profile (emulator/profiles/*.toml) is missing, unreadable or incomplete."""


class TiersError(TierlabError):
    """The host's tiers are not up, or checking them failed."""


class HostCheckError(TierlabError):
    """A host lacks something a run with these settings needs (tierlab doctor, and every playbook's first check);
    nothing has been made yet."""
