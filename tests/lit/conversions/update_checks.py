"""Regenerate the CHECK lines of the golden lowering tests in this folder from the pass output.

Each ``*.mlir`` here is: comment lines saying what the lowering does, one
``// RUN: %fuse-opt %s -p '<pipeline>' | filecheck %s`` line, the expected
output as ``// CHECK-LABEL`` / ``// CHECK-NEXT`` lines, then the input module.
After a deliberate change to a lowering's output (a typed attribute, a new
op), run ``python tests/lit/conversions/update_checks.py [FILE...]`` and
review the diff: like MLIR's ``generate-test-checks.py``, the numbered SSA
names become FileCheck variables (``%[[V3:[0-9]+]]`` where defined,
``%[[V3]]`` where used), so the tests pin the IR's structure, not its
numbering. lit does not collect ``.py`` files, so this script is not a test.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
RUN = re.compile(r"^// RUN: %fuse-opt %s -p (?P<pipeline>'[^']*'|\S+) \| filecheck %s$")


def check_lines(output: str) -> list[str]:
    """``output`` as one CHECK-LABEL line and CHECK-NEXT lines, SSA numbers captured as variables."""
    seen: set[str] = set()

    def name(m: re.Match[str]) -> str:
        n = m.group(1)
        if n in seen:
            return f"%[[V{n}]]"
        seen.add(n)
        return f"%[[V{n}:[0-9]+]]"

    out: list[str] = []
    for line in output.rstrip("\n").split("\n"):
        if not line.strip():
            continue
        # FileCheck reads `[[` as a variable and `{{` as a regex: escape both where they are text.
        line = line.replace("{{", "{{[{][{]}}").replace("[[", "{{\\[\\[}}")
        line = re.sub(r"%([0-9]+)\b", name, line)
        out.append(f"// CHECK-NEXT: {line}" if out else f"// CHECK-LABEL: {line.strip()}")
    return out


def update(path: Path) -> bool:
    """Rewrite the CHECK lines of ``path`` from the current output; whether the file changed."""
    text = path.read_text()
    lines = text.split("\n")
    header = [ln for ln in lines if ln.startswith("//") and not ln.startswith("// CHECK")]
    module = "\n".join(ln for ln in lines if not ln.startswith("//"))
    runs = [m for ln in header if (m := RUN.match(ln))]
    if len(runs) != 1:
        raise SystemExit(f"{path}: expected one `// RUN: %fuse-opt %s -p PIPELINE | filecheck %s` line")
    pipeline = shlex.split(runs[0].group("pipeline"))[0]
    cmd = [sys.executable, "-m", "fuse_mlir.cli.fuse_opt", "-", "-p", pipeline, "--input-format", "mlir"]
    res = subprocess.run(cmd, input=module, capture_output=True, text=True, cwd=HERE.parents[2])
    if res.returncode:
        raise SystemExit(f"{path}: fuse-opt failed:\n{res.stderr}")
    new = "\n".join([*header, *check_lines(res.stdout)]) + "\n" + module.lstrip("\n")
    if new != text:
        path.write_text(new)
        return True
    return False


def main(argv: list[str]) -> int:
    paths = [Path(a) for a in argv] or sorted(HERE.glob("*.mlir"))
    for p in paths:
        if update(p):
            print(f"updated {p}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
