"""Starting a database server: what is refused before it is started."""

import socket

import pytest

from tierlab_host.engines import server
from tierlab_host.system import HostError


def test_a_port_another_process_listens_on_is_refused_with_the_variables_that_choose_it():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(HostError) as err:
            server.require_free_port("mariadb-16k", port)
    assert str(err.value) == (f"mariadb-16k: port {port} on 127.0.0.1 is taken by another process (Address already in "
                              "use); give this tierlab root ports of its own (mysql_port_base, postgresql_port)")


def test_a_port_nothing_listens_on_is_free():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server.require_free_port("postgresql-8k", port)
