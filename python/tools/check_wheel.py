"""Install the wheel ``cargo xtask wheel`` built into this (fresh) virtual
environment and run the README's Python example with it, from a directory
outside the source tree and without ``VSH_WORKER``: the bundled worker and
nothing else installed must be enough.

Usage: ``python check_wheel.py WHEEL_DIR README``. Exits non-zero, saying
why, when the install or the example fails or the example's effects are not
on disk.
"""

import os
import pathlib
import re
import subprocess
import sys
import tempfile

PLACEHOLDER = "/path/to/project"


def readme_example(readme: pathlib.Path) -> str:
    """The first Python block of the README's "Using vsh from Python" section."""
    text = readme.read_text()
    section = text.split("## Using vsh from Python", 1)[1]
    found = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    if found is None:
        raise SystemExit("the README's Python section has no python block")
    return found.group(1)


def main() -> None:
    wheels = sorted(pathlib.Path(sys.argv[1]).glob("vsh_runtime-*.whl"))
    if len(wheels) != 1:
        raise SystemExit(f"expected exactly one vsh_runtime wheel in {sys.argv[1]}, found {wheels}")
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-index", "--no-deps", "--force-reinstall", str(wheels[0])],
        check=True,
    )
    example = readme_example(pathlib.Path(sys.argv[2]))
    if PLACEHOLDER not in example:
        raise SystemExit(f"the README example no longer opens {PLACEHOLDER}")
    with tempfile.TemporaryDirectory() as scratch:
        root = pathlib.Path(scratch)
        project = root / "project"
        project.mkdir()
        (project / "old.log").write_text("old\n")
        script = root / "example.py"
        script.write_text(example.replace(PLACEHOLDER, str(project)))
        env = {key: value for key, value in os.environ.items() if not key.startswith("VSH_")}
        env["VSH_AUTHORITY_KEY"] = str(root / "authority.key")
        ran = subprocess.run([sys.executable, str(script)], cwd=root, env=env, capture_output=True, text=True)
        if ran.returncode != 0:
            raise SystemExit(f"the README example failed ({ran.returncode}):\n{ran.stdout}{ran.stderr}")
        if not ran.stdout.startswith("auto-approved {'kind': 'auto-approved'}"):
            raise SystemExit(f"the README example printed {ran.stdout!r}")
        if (project / "notes.txt").read_text() != "hi" or (project / "old.log").exists():
            raise SystemExit("the README example's commits are not on disk")
    import vsh

    location = pathlib.Path(vsh.__file__).resolve()
    if not (location.parent / "_bin" / "vsh").is_file():
        raise SystemExit(f"the installed package at {location.parent} has no bundled worker")
    size = wheels[0].stat().st_size
    print(f"{wheels[0].name}: {size / 1e6:.1f} MB, installed in {sys.prefix}; the README example ran")


if __name__ == "__main__":
    main()
