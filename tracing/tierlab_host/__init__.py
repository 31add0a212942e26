"""Host-side agent of tierlab: runs on each database host, Python stdlib only.

Ansible copies this package to the host and runs `python3 -m tierlab_host`.
It starts and stops the private database instances it owns, captures block
traces, maps table files to their physical extents and runs the query loop.
"""
