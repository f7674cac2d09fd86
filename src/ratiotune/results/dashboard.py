"""`ratiotune dashboard`: optuna-dashboard on an experiment's Optuna study, live while it runs.

The dashboard can rename and delete studies and tell trials in the storage it serves, so it
listens on 127.0.0.1 unless --host says otherwise; from a GPU machine, reach it through an SSH
tunnel (docs/dashboard.md). wsgiref serves one request at a time: enough for one browser.
"""

from __future__ import annotations

import signal
import sys
import threading
from pathlib import Path
from wsgiref.simple_server import WSGIRequestHandler, make_server

from ratiotune.core.storage import OPTUNA_FILE, open_storage, read_record
from ratiotune.core.study import StudyError


class QuietHandler(WSGIRequestHandler):
    """No access-log line per request: the browser polls the API every few seconds while a study runs."""

    def log_message(self, format, *args):
        pass


def serve(experiment_dir: Path, host: str, port: int) -> int:
    """Serve until Ctrl-C; returns the exit status."""
    import optuna_dashboard

    if not experiment_dir.is_dir():
        raise StudyError(f"{experiment_dir}: no such experiment folder")
    record = read_record(experiment_dir)
    if record is None:
        raise StudyError(
            f"{experiment_dir}: no Optuna storage ({OPTUNA_FILE} is missing): the study was made before ratiotune "
            "kept one, or Optuna does not search it (PBT, nothing searched); `ratiotune report` still reads it"
        )
    location, study_name = record
    if "://" not in location and not Path(location).is_file():
        raise StudyError(f"{experiment_dir}: the Optuna journal {location} is missing (has the search started a trial?)")
    storage = open_storage(location)
    try:
        server = make_server(host, port, optuna_dashboard.wsgi(storage), handler_class=QuietHandler)
    except OSError as exc:
        raise StudyError(f"--host {host} --port {port}: cannot listen there ({exc.strerror}); pass another --port") from None
    url = f"http://{host}:{server.server_port}/dashboard"
    try:
        url += f"/studies/{storage.get_study_id_from_name(study_name)}"
    except KeyError:
        pass  # the study appears once the search asks for its first trial: the list page shows it then
    print(f"optuna-dashboard for study {study_name!r} ({location}): {url}", flush=True)
    print("Ctrl-C stops it.", file=sys.stderr, flush=True)
    # The server runs in a thread and the signals only set an event: a KeyboardInterrupt raised
    # while a request is being handled would be swallowed by wsgiref (it answers a 500 and serves
    # on). Ctrl-C and `kill` both stop it cleanly, also when started from a script (a
    # non-interactive shell starts background jobs with SIGINT ignored).
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    threading.Thread(target=server.serve_forever, daemon=True).start()
    while not stop.wait(0.5):
        pass
    server.shutdown()
    server.server_close()
    print("dashboard stopped", file=sys.stderr)
    return 0
