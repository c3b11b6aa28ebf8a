"""A minimal PEP 517 build backend (standard library only) for the demo plug-in.

Builds a pure-Python wheel of the ``fuse_mlir_demo_plugin`` package, or an
editable wheel whose ``.pth`` file points at this folder, with the entry
points declared in ``pyproject.toml``. Enough for ``pip install [-e]`` offline.
"""

from __future__ import annotations

import base64
import hashlib
import tomllib
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent
PACKAGE = "fuse_mlir_demo_plugin"


def _project() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def _dist_name(project: dict) -> str:
    return project["name"].replace("-", "_")


def _metadata_files(project: dict) -> dict[str, str]:
    metadata = (
        f"Metadata-Version: 2.1\nName: {project['name']}\nVersion: {project['version']}\n"
        f"Summary: {project.get('description', '')}\nRequires-Python: {project.get('requires-python', '')}\n"
    )
    wheel = "Wheel-Version: 1.0\nGenerator: demo_build\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    entry_points = ""
    for group, entries in project.get("entry-points", {}).items():
        entry_points += f"[{group}]\n" + "".join(f"{k} = {v}\n" for k, v in entries.items()) + "\n"
    return {"METADATA": metadata, "WHEEL": wheel, "entry_points.txt": entry_points}


def _record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}\n"


def _write_wheel(directory: str, files: dict[str, bytes]) -> str:
    project = _project()
    dist_info = f"{_dist_name(project)}-{project['version']}.dist-info"
    for name, text in _metadata_files(project).items():
        files[f"{dist_info}/{name}"] = text.encode()
    record = "".join(_record_line(n, d) for n, d in files.items()) + f"{dist_info}/RECORD,,\n"
    files[f"{dist_info}/RECORD"] = record.encode()
    wheel_name = f"{_dist_name(project)}-{project['version']}-py3-none-any.whl"
    with zipfile.ZipFile(Path(directory) / wheel_name, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in files.items():
            zf.writestr(name, data)
    return wheel_name


def get_requires_for_build_wheel(config_settings: dict | None = None) -> list[str]:
    return []


def get_requires_for_build_editable(config_settings: dict | None = None) -> list[str]:
    return []


def build_wheel(
    wheel_directory: str, config_settings: dict | None = None, metadata_directory: str | None = None
) -> str:
    files = {f"{PACKAGE}/{p.name}": p.read_bytes() for p in sorted((ROOT / PACKAGE).glob("*.py"))}
    return _write_wheel(wheel_directory, files)


def build_editable(
    wheel_directory: str, config_settings: dict | None = None, metadata_directory: str | None = None
) -> str:
    return _write_wheel(wheel_directory, {f"{PACKAGE}.pth": f"{ROOT}\n".encode()})
