"""A moto that imports itself once and forks a server per request (`moto.rs`, `MotoServer`).

A moto server spends about 1.5 s of CPU importing its services, and its first EC2, CloudFormation
and Lambda requests load their data; the tests start some seventy servers, beside each other, on
two cores. This process does that work once, with the fixes (`moto_fixes/`, as sitecustomize)
applied, and forks: a child is a fresh server on its own port, sharing the loaded modules and no
state (nothing here creates a backend). It also loads, once, what every server would load for
itself: each service's API model (a JSON parse per service, which its responses serialize with),
and the regions its backends serve (botocore's endpoint data and, again, the model).
Then it freezes what it holds out of the collector (`gc.freeze`), so a child's collections do not
walk the modules and models it shares.

A server forked here logs no request line unless MOTO_LOG_DIR keeps its log: werkzeug writes one
per request, through the logging module, to a stderr that is /dev/null otherwise.

Protocol, one line each way: the parent writes a port; this process answers the child's pid, or
`error <why>`. It exits when its stdin closes (the test process is gone); each child is killed
when this process dies (PR_SET_PDEATHSIG), so no server outlives the run.
"""

import ctypes
import gc
import os
import random
import signal
import sys
import threading

import moto.cloudformation.parsing  # noqa: F401  (imports every service's models)
import moto.server
from moto.backends import get_backend
from moto.core.base_backend import AccountSpecificBackend
from moto.core.utils import get_service_model
from moto.moto_api._internal import mock_random
from moto.moto_server.werkzeug_app import create_backend_app
from werkzeug.serving import WSGIRequestHandler

# The services the project's stacks, stand-ins and tests call: their URL maps and responses.
SERVICES = (
    "cloudformation cloudwatch ec2 events fis iam kms lambda logs resourcegroupstaggingapi s3 sns "
    "sqs ssm sts"
).split()

PR_SET_PDEATHSIG = 1

# Net allocations between a server's young-generation collections (Python's default is 700).
GC_THRESHOLD = 20000


def serve(port):
    """The child: a moto server on `port`, as `moto_server -H 127.0.0.1 -p <port>` runs it."""
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    # Forked children would otherwise draw the same ids.
    random.seed()
    mock_random.seed()
    log_dir = os.environ.get("MOTO_LOG_DIR")
    log = os.path.join(log_dir, f"moto-{port}.log") if log_dir else os.devnull
    null = os.open(os.devnull, os.O_RDWR)
    out = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(null, 0)
    os.dup2(null, 1)
    os.dup2(out, 2)
    if not log_dir:
        WSGIRequestHandler.log_request = lambda *args, **kwargs: None
    # The collector ran every 700 allocations, some 10 % of a server's CPU through a storm: each
    # request allocates thousands of objects that reference counting frees anyway.
    gc.set_threshold(GC_THRESHOLD)
    moto.server.main(["-H", "127.0.0.1", "-p", str(port)])


def main():
    for service in SERVICES:
        create_backend_app(service)
        get_service_model(service)
        # The regions its account backends serve, listed once (moto_fixes/).
        AccountSpecificBackend._generate_regions(None, get_backend(service).service_name)
    gc.freeze()
    # fork() copies only the calling thread: with another running, a lock it held would stay held
    # in every child.
    if threading.active_count() != 1:
        sys.exit(f"moto_zygote: {threading.active_count()} threads after the imports; cannot fork")
    # Children are reaped by the kernel: none becomes a zombie whose pid the parent still kills.
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    for line in sys.stdin:
        try:
            port = int(line)
            pid = os.fork()
        except Exception as e:  # a bad line, or no more processes
            print(f"error {e}", flush=True)
            continue
        if pid == 0:
            try:
                serve(port)
            finally:
                os._exit(1)
        print(pid, flush=True)


if __name__ == "__main__":
    main()
