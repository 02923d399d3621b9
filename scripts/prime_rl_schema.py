"""Regenerate optimizers/backends/prime_rl_schema.json from prime-rl's own config classes.

prime-rl's config package (``packages/prime-rl-configs``) is not on the package index and
declares Python 3.12, but it is plain pydantic: its classes load on 3.11 beside the packages
it imports (verifiers 0.4, prime-pydantic-config, renderers - all on the index). This script
imports ``RLConfig`` and ``SFTConfig`` from a checkout of the upstream repository and writes
their JSON schemas (pydantic's ``model_json_schema``) with the commit they came from. The
export (``optimizers/backends/prime_rl.py``) validates every config it writes against them.

    # a checkout (a git work tree, or a `git archive` of one commit: then pass --commit)
    python scripts/prime_rl_schema.py /path/to/prime-rl [--commit SHA --describe v0.8.1.dev67]

Run it with an interpreter that has verifiers 0.4.x (scripts/test.sh builds one:
``.venvs/verifiers-v1/bin/python``). What a JSON schema cannot say: prime-rl's
cross-field ``model_validator`` checks (shared seq_len, model name...) run only in prime-rl.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "optimizers" / "backends" / "prime_rl_schema.json"


def git(checkout: Path, *args: str) -> str | None:
    done = subprocess.run(["git", "-C", str(checkout), *args], capture_output=True, text=True, check=False)
    return done.stdout.strip() or None if done.returncode == 0 else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkout", type=Path, help="prime-rl source tree (holds packages/prime-rl-configs)")
    parser.add_argument("--commit", help="the commit of the tree (default: git rev-parse HEAD)")
    parser.add_argument("--describe", help="its `git describe --tags` (default: asked of git)")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    source = args.checkout / "packages" / "prime-rl-configs" / "src"
    if not (source / "prime_rl" / "configs" / "rl.py").is_file():
        sys.exit(f"{args.checkout} holds no packages/prime-rl-configs/src/prime_rl/configs/rl.py")
    commit = args.commit or git(args.checkout, "rev-parse", "HEAD")
    if not commit:
        sys.exit("not a git work tree: pass --commit SHA (and --describe)")
    describe = args.describe or git(args.checkout, "describe", "--tags", commit)

    sys.path.insert(0, str(source))  # the package cannot be installed here (requires-python ~=3.12)
    import verifiers
    from prime_rl.configs.rl import RLConfig
    from prime_rl.configs.sft import SFTConfig

    document = {
        "source": "github.com/PrimeIntellect-ai/prime-rl, packages/prime-rl-configs",
        "commit": commit,
        "describe": describe,
        "verifiers": verifiers.__version__,
        "generated_by": "scripts/prime_rl_schema.py",
        "schemas": {
            "rl": RLConfig.model_json_schema(mode="validation"),
            "sft": SFTConfig.model_json_schema(mode="validation"),
        },
    }
    args.out.write_text(json.dumps(document, indent=1, sort_keys=True) + "\n")
    print(f"wrote {args.out} (prime-rl {describe or '?'} @ {commit[:12]})")


if __name__ == "__main__":
    main()
