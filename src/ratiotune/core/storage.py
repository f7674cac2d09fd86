"""Where an experiment lives: a local folder, or a URI that pyarrow understands (s3://, gs://, file://).

A study on several nodes needs storage every node reaches (Ray syncs trial results and
checkpoints there): a shared filesystem path (NFS) or a bucket URI. One machine can use
any local folder.
"""

from __future__ import annotations

from pathlib import Path

# Inside an experiment folder, STAGING_PREFIX + the trial's folder name: where that trial writes a
# checkpoint before Ray copies it into its trial folder (trainable.checkpoint_staging_dir says why
# there). Hidden: never read as a trial; the trial removes it when it ends.
STAGING_PREFIX = ".checkpoint-staging-"


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
