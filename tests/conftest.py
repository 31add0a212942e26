import sys
from pathlib import Path

# the host-side agent is a plain directory copied to hosts, not an installed package
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tracing"))
