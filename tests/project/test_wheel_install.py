"""The package as a user installs it: the sdist and the wheel built from the tracked files, the wheel
installed into a fresh virtual environment outside the checkout, and everything run from a folder
outside the checkout too: ``rlmkit --help`` and ``--version``, ``python -m rlmkit lm check`` on a
scripted model, a chat completion from ``rlmkit serve``, and the files the package carries (the
embedded model's shipped adapter and its record, the task corpora, the viewer's assets) found
where the wheel put them.

Fast on purpose: the wheel is installed with ``--no-deps``, and the fresh environment borrows the
test interpreter's already-installed dependencies. The borrowing must not bring the checkout back
in, and the test interpreter usually has it installed editable: setuptools' editable install is a
``.pth`` file in site-packages that imports ``__editable___<dist>_finder`` and puts its finder on
``sys.meta_path``, mapping ``rlmkit`` (and any submodule the wheel lacks) to the checkout. So the
fresh environment's own site-packages, first on ``sys.path``, holds a module of that same name
whose ``install()`` does nothing: the ``.pth`` line imports the harmless one and the finder is
never installed. The probe run in the environment then shows, from inside it, that the shadow
was the one imported, that no editable finder is on ``sys.meta_path``, that the checkout is not
on ``sys.path``, and that no module it imported came from the checkout.

(``--system-site-packages`` would not do: under a test interpreter that is itself a venv, it
borrows the base interpreter's packages, not the venv's.)
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import sysconfig
import tarfile
import textwrap
import tomllib
import zipfile
from pathlib import Path

import httpx
import pytest

from rlmkit.testing import ScriptedServer, is_root_request
from tests.helpers.replies import repl
from tests.helpers.serve_programs import serving_url
from tests.helpers.waiting import wait_for
from tests.project.test_public_surface import VERBS, listed_verbs

ROOT = Path(__file__).resolve().parents[2]
VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
BUILT_FROM = ["pyproject.toml", "README.md", "rlmkit", "programs", "optimizers", "signatures"]

PROBE = textwrap.dedent(
    """
    import json, sys
    from importlib.metadata import distribution

    import optimizers, programs, rlmkit, signatures
    from programs.tasks import real_text
    from rlmkit.local import adapter, model_file, preset
    from rlmkit.view import render

    checkout = sys.argv[1]
    found = {
        "rlmkit": rlmkit.__file__,
        "version": rlmkit.__version__,
        "metadata": str(distribution("dspy-rlmkit").locate_file("")),
        "shipped_adapter": str(adapter.shipped_adapter()),  # its sha256 checked against its record
        "shipped_record": str(adapter.SHIPPED_ADAPTER) if adapter.shipped_record() else None,
        "tuned_program": str(preset.SHIPPED_PROGRAM) if preset.shipped_program() else None,
        "model_parts": [str(p) for p in model_file.find_parts()],
        "corpora": {
            name: len(real_text.corpus(name)["documents"]) for name in real_text.CORPORA
        },
        "viewer_page": len(render.render_page({"runs": [], "problems": []})),
        "editable_finders": [
            repr(f) for f in sys.meta_path if "__editable__" in getattr(f, "__module__", "")
        ],
        "shadows": sorted(
            module.__file__ for name, module in sys.modules.items() if name.startswith("__editable__")
        ),
        "checkout_on_path": [p for p in sys.path if p and p.rstrip("/") == checkout.rstrip("/")],
        "from_checkout": sorted(
            name for name, module in list(sys.modules.items())
            if (getattr(module, "__file__", None) or "").startswith(checkout + "/")
        ),
    }
    print(json.dumps(found))
    """
)

SHADOW = (
    "# Stands in for the test interpreter's editable install of the checkout: its .pth file imports a\n"
    "# module of this name to install a finder that maps rlmkit to the checkout; this one installs nothing.\n"
    "def install():\n"
    "    pass\n"
)


def _tracked(*paths: str) -> list[str]:
    out = subprocess.run(["git", "ls-files", "--", *paths], cwd=ROOT, capture_output=True, text=True)
    if out.returncode != 0:
        pytest.skip("not a git checkout: the tracked files are unknown")
    return [name for name in out.stdout.splitlines() if (ROOT / name).is_file()]


def _clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "RLMKIT_", "VIRTUAL_ENV"))}
    return {**env, "PYTHONNOUSERSITE": "1", **extra}


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """``(venv, elsewhere)``: a fresh venv holding the wheel, and a folder to run from, both outside
    the checkout."""
    base = tmp_path_factory.mktemp("wheel")
    assert not base.is_relative_to(ROOT)
    clone = base / "clone"  # the tracked files alone, as a fresh clone holds them
    for name in _tracked(*BUILT_FROM):
        (clone / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, clone / name)
    # No flag: build makes the sdist, then the wheel from the unpacked sdist, so a file the sdist
    # forgets is missing from the wheel too. --no-isolation: the build needs no network.
    built = subprocess.run(
        [sys.executable, "-m", "build", "--no-isolation", "--outdir", str(base / "dist"), str(clone)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    (sdist,) = (base / "dist").glob("dspy_rlmkit-*.tar.gz")
    (wheel,) = (base / "dist").glob("dspy_rlmkit-*.whl")
    assert sdist.name == f"dspy_rlmkit-{VERSION}.tar.gz" and wheel.name.startswith(f"dspy_rlmkit-{VERSION}-")

    venv = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    site_dir = Path(
        subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
            capture_output=True, text=True, check=True,
        ).stdout.strip()
    )  # fmt: skip
    borrowed = [p for p in sys.path if p.endswith(("site-packages", "dist-packages")) and Path(p).is_dir()]
    assert sysconfig.get_path("purelib") in borrowed
    shadowed = []
    for folder in borrowed:
        for finder in Path(folder).glob("__editable__*_finder.py"):
            (site_dir / finder.name).write_text(SHADOW)
            shadowed.append(finder.stem)
    # addsitedir, not a bare path: the borrowed folders' own .pth files (namespace packages, the
    # editable install's among them) run as they do for the test interpreter
    (site_dir / "zz_borrowed_dependencies.pth").write_text(
        "".join(f"import site; site.addsitedir({folder!r})\n" for folder in borrowed)
    )
    install = subprocess.run(
        [str(python), "-m", "pip", "install", "--no-deps", "--no-index", "--disable-pip-version-check",
         "-q", str(wheel)],
        capture_output=True, text=True, timeout=300, env=_clean_env(),
    )  # fmt: skip
    assert install.returncode == 0, install.stdout[-3000:] + install.stderr[-3000:]
    elsewhere = base / "elsewhere"
    elsewhere.mkdir()
    return venv, elsewhere, wheel, sdist, shadowed


def run_in(installed, *argv: str, **env: str) -> subprocess.CompletedProcess:
    venv, elsewhere, *_ = installed
    return subprocess.run(
        [str(venv / "bin" / argv[0]), *argv[1:]],
        cwd=elsewhere, env=_clean_env(COLUMNS="100", **env), capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def test_the_sdist_and_the_wheel_carry_the_package_data(installed):
    _, _, wheel, sdist, _ = installed
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
    with tarfile.open(sdist) as archive:
        top = sdist.name.removesuffix(".tar.gz")
        in_sdist = {name.removeprefix(top + "/") for name in archive.getnames()}
    assert {
        "pyproject.toml",
        "README.md",
        "rlmkit/__init__.py",
        "programs/tasks/corpus/prose.json.gz",
    } <= in_sdist
    for data in (
        "rlmkit/local/shipped_adapter.gguf",
        "rlmkit/local/shipped_adapter.json",
        "rlmkit/local/tuned_program.json",
        "programs/tasks/corpus/prose.json.gz",
        "programs/tasks/corpus/source.json.gz",
        "rlmkit/view/template.html",
        "rlmkit/view/viewer.css",
        "rlmkit/view/app.js",
    ):
        assert data in names, f"the wheel lacks {data}"


def test_the_installed_package_is_the_wheel_and_finds_its_files_there(installed):
    venv, *_, shadowed = installed
    probe = run_in(installed, "python", "-c", PROBE, str(ROOT))
    assert probe.returncode == 0, probe.stderr[-3000:]
    found = json.loads(probe.stdout)
    inside = str(venv.resolve()) + "/"
    assert found["rlmkit"].startswith(inside), found["rlmkit"]
    assert found["metadata"].startswith(inside) and found["version"] == VERSION
    # the checkout cannot leak in: no editable finder, not on sys.path, no module from it
    assert found["editable_finders"] == [] and found["checkout_on_path"] == []
    assert found["from_checkout"] == [], found["from_checkout"]
    # each editable install's .pth did run, and imported the shadow: its finder never went in
    assert sorted(Path(shadow).stem for shadow in found["shadows"]) == sorted(shadowed)
    assert all(shadow.startswith(inside) for shadow in found["shadows"]), found["shadows"]
    for key in ("shipped_adapter", "shipped_record", "tuned_program"):
        assert found[key] and found[key].startswith(inside), (key, found[key])
    assert len(found["model_parts"]) == 22  # the embedded model's parts, through the installed metadata
    assert all(count > 0 for count in found["corpora"].values()) and set(found["corpora"]) == {
        "prose",
        "source",
    }
    assert found["viewer_page"] > 10_000


def test_rlmkit_help_and_version_from_the_installed_command(installed):
    shown = run_in(installed, "rlmkit", "--help")
    assert shown.returncode == 0, shown.stderr
    assert listed_verbs(shown.stdout) == VERBS  # the entry-point verbs come from the wheel's metadata
    version = run_in(installed, "rlmkit", "--version")
    assert version.stdout.strip() == f"rlmkit {VERSION} (dspy-rlmkit)"


def test_python_m_rlmkit_lm_check_on_a_scripted_model(installed):
    with ScriptedServer(lambda body: "ready") as model:
        checked = run_in(
            installed, "python", "-m", "rlmkit", "lm", "check", "openai/scripted", "--api-base", model.url
        )
        assert checked.returncode == 0, checked.stdout + checked.stderr
        assert "the LM answers" in checked.stdout and "'ready'" in checked.stdout
        assert len(model.requests) == 1


def _answer(body: dict) -> str:
    if not is_root_request(body):
        return "sub"
    return repl("SUBMIT(answer='served: ' + question)")


def test_rlmkit_serve_answers_a_chat_completion(installed):
    venv, elsewhere, *_ = installed
    with ScriptedServer(_answer) as model:
        server = subprocess.Popen(
            [str(venv / "bin" / "rlmkit"), "serve", "context, question -> answer", "--lm", "openai/scripted",
             "--api-base", model.url, "--port", "0"],
            cwd=elsewhere, env=_clean_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip
        try:
            url = serving_url(server)
            root = url.removesuffix("/v1")
            wait_for(lambda: httpx.get(f"{root}/health/ready").status_code == 200, "the program loaded", 60)
            reply = httpx.post(
                f"{url}/chat/completions",
                json={"model": "rlmkit", "messages": [{"role": "user", "content": "from the wheel"}]},
                timeout=60,
            )
            assert reply.status_code == 200, reply.text
            assert reply.json()["choices"][0]["message"]["content"] == "served: from the wheel"
            server.send_signal(signal.SIGTERM)
            assert server.wait(60) in (0, -signal.SIGTERM)
        finally:
            if server.poll() is None:
                server.kill()
                server.wait()
