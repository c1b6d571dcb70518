"""Sandboxed execution: the Executor interface, its backends, the workspace writer and lineage installs."""

from .base import ExecResult, Executor, Limits, SandboxError
from .lineage import inherit_install_state, install_env, install_environ, node_env_dir
from .registry import BACKENDS, make_executor, resolve_backend
from .workspace import FileRejection, FileSpec, WorkspaceError, validate_files, write_files

__all__ = [
    "BACKENDS",
    "ExecResult",
    "Executor",
    "FileRejection",
    "FileSpec",
    "Limits",
    "SandboxError",
    "WorkspaceError",
    "inherit_install_state",
    "install_env",
    "install_environ",
    "make_executor",
    "node_env_dir",
    "resolve_backend",
    "validate_files",
    "write_files",
]
