"""Where an experiment lives: a local folder, or a URI that pyarrow understands (s3://, gs://, file://).

A study on several nodes needs storage every node reaches (Ray syncs trial results and
checkpoints there): a shared filesystem path (NFS) or a bucket URI. One machine can use
any local folder. An experiment's Optuna study lives beside it (OPTUNA_FILE says where):
read_record and open_storage find and open it for every reader (the search, the dashboard,
a notebook); search/optuna_study.py writes it. Optuna is imported only when a storage is opened.
"""

from __future__ import annotations

import json
from pathlib import Path

# Inside an experiment folder, STAGING_PREFIX + the trial's folder name: where that trial writes a
# checkpoint before Ray copies it into its trial folder (trainable.checkpoint_staging_dir says why
# there). Hidden: never read as a trial; the trial removes it when it ends.
STAGING_PREFIX = ".checkpoint-staging-"
# Inside an experiment folder: where its Optuna study is, {"storage": journal file or URL, "study_name": ...}.
OPTUNA_FILE = "optuna.json"


def is_uri(location: str | Path) -> bool:
    return "://" in str(location)


def experiment_location(storage: str, name: str) -> str:
    """storage/name: a resolved local path, or the URI with the name appended."""
    if is_uri(storage):
        return storage.rstrip("/") + "/" + name
    return str(Path(storage).expanduser().resolve() / name)


def split_location(location: str | Path) -> tuple[str, str]:
    """(storage_path, name) as Ray's RunConfig takes them."""
    if is_uri(location):
        parent, _, name = str(location).rstrip("/").rpartition("/")
        return parent, name
    path = Path(location)
    return str(path.parent), path.name


def _filesystem(location: str):
    import pyarrow.fs

    return pyarrow.fs.FileSystem.from_uri(location)


def exists(location: str) -> bool:
    if not is_uri(location):
        return Path(location).exists()
    import pyarrow.fs

    fs, path = _filesystem(location)
    return fs.get_file_info(path).type != pyarrow.fs.FileType.NotFound


def write_text(location: str, filename: str, text: str) -> None:
    """Write one file (filename may hold a subfolder: prompts/train.txt) into the experiment
    folder (or prefix), creating the folders it needs."""
    if not is_uri(location):
        (Path(location) / filename).parent.mkdir(parents=True, exist_ok=True)
        (Path(location) / filename).write_text(text)
        return
    fs, path = _filesystem(location)
    fs.create_dir(f"{path}/{filename}".rsplit("/", 1)[0], recursive=True)
    with fs.open_output_stream(f"{path}/{filename}") as stream:
        stream.write(text.encode())


def open_storage(location: str):
    """An Optuna storage: an RDB URL (scheme://...) or a journal file path. A database that cannot be
    reached, or whose driver is not installed (psycopg2 for postgresql://), is a StudyError."""
    import optuna
    from sqlalchemy.exc import SQLAlchemyError

    from ratiotune.core.study import StudyError

    try:
        if "://" in location:
            return optuna.storages.RDBStorage(location)
        return optuna.storages.JournalStorage(optuna.storages.journal.JournalFileBackend(location))
    except (ImportError, OSError, ValueError, RuntimeError, SQLAlchemyError, optuna.exceptions.StorageInternalError) as exc:
        message = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise StudyError(f"Optuna storage {location}: cannot open it ({message})") from None


def read_record(experiment_dir: Path) -> tuple[str, str] | None:
    """(storage location, study name) of an experiment folder, or None when it has no Optuna storage."""
    path = experiment_dir / OPTUNA_FILE
    if not path.is_file():
        return None
    record = json.loads(path.read_text())
    location = record["storage"]
    if "://" not in location and not Path(location).is_absolute():
        location = str(experiment_dir / location)
    return location, record["study_name"]
