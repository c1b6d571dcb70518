#!/usr/bin/env bash
# Mutation testing of the core modules (issue 20): does the test suite notice when the logic changes?
#
#   scripts/mutation.sh                      # every core module (see MODULES below), 15-30 min on 2 cores
#   scripts/mutation.sh context/packer.py    # one or more modules, by path under ai_scientist/
#   scripts/mutation.sh --changed REV        # the core modules whose code, focused tests or equivalent
#                                            # mutants (docs/testing.md) differ from REV
#   scripts/mutation.sh --ci                 # CI's step (scripts/test.sh, issue 31): --changed BASE
#                                            # within a time budget, BASE read from .ci/mutation-base
#   ... --list                               # with --changed or --ci: print the selection, run nothing
#   scripts/mutation.sh --modules            # print each core module and its focused tests
#
# For each module: copies the work tree (tracked + new, non-ignored files; or the commit
# MUTATION_REV, e.g. HEAD, when set) to a temporary directory, runs mutmut 3 there on that one module with its focused tests (Hypothesis
# deterministic: HYPOTHESIS_PROFILE=mutation, see tests/conftest.py), then prints a score table
# and every surviving mutant with file:line and its diff. Nothing is written into the work tree.
#
# Score = detected / (mutants - equivalent). Detected: killed, timeout, segfault. A mutant
# counts as equivalent only when docs/testing.md lists its name (in backticks) in the
# "Equivalent mutants" section, with the reason.
#
# --ci: BASE is $MUTATION_BASE if set, else each module's commit in .ci/mutation-base (the commit
# its score in docs/testing.md was measured on; moved when it is re-measured; a module without
# a line there is always selected). The budget is MUTATION_BUDGET seconds
# (default 480): modules run shortest first by their time in docs/testing.md's Scores table; one
# whose time does not fit what is left is skipped, and one still running when the budget ends is
# stopped; both print a "[mutation] SKIPPED" line and neither fails the step. MUTATION_BUDGET also
# applies to the other forms when set.
#
# Environment: MUTATION_REV (measure a commit instead of the work tree), MUTATION_PYTHON (default .venv/bin/python, needs mutmut from the dev extra),
# MUTATION_JOBS (parallel mutant runs, default 2), MUTATION_KEEP=1 keeps the temporary
# directory (its path is printed) for `mutmut show` / `mutmut browse` there, MUTATION_SHOW_MAX
# (default 0 = all; 20 with --ci) limits the survivors listed per module.
# Exit status: 0 when every module run reaches MUTATION_MIN (default 85) percent, 1 otherwise
# (or when mutmut fails), 2 on bad usage or a base that is not a commit.
set -euo pipefail

# The whole script is one function, read before it runs: editing this file during a run is safe.
main() {
repo="$(cd "$(dirname "$0")/.." && pwd)"
py="${MUTATION_PYTHON:-$repo/.venv/bin/python}"
jobs="${MUTATION_JOBS:-2}"
min_score="${MUTATION_MIN:-85}"

# module (under ai_scientist/) -> its focused tests
declare -A TESTS=(
  [context/packer.py]="tests/test_context_packer.py tests/test_context_assemble.py"
  [context/policies.py]="tests/test_context_shrink.py tests/test_context_policies.py tests/test_mut_policies.py"
  [context/json_preview.py]="tests/test_context_shrink.py tests/test_context_policies.py tests/test_mut_json_preview.py"
  [execution/workspace.py]="tests/test_exec_workspace.py"
  [treesearch/best.py]="tests/test_search_best.py tests/test_search_stages.py tests/test_search_index.py tests/test_mut_best.py"
  [base/config.py]="tests/test_mut_config.py tests/test_config_cli.py tests/test_mut_config_describe.py"
  [memory/protocol.py]="tests/test_mut_memory_protocol.py tests/test_memory_protocol.py"
  # measured on request only (not in MODULES): the journal's search index
  [treesearch/journal.py]="tests/test_search_index.py tests/test_search_journal.py tests/test_search_best.py"
)
MODULES=(context/packer.py context/policies.py context/json_preview.py execution/workspace.py
  treesearch/best.py base/config.py memory/protocol.py)

usage() {
  echo "usage: scripts/mutation.sh [MODULE ...] | --changed REV [--list] | --ci [--list] | --modules" \
    "   MODULE one of: ${MODULES[*]} (default: all of these) or treesearch/journal.py" >&2
  exit 2
}
mods=()
if [ "${1:-}" = "--modules" ]; then # the core modules and their focused tests, one module a line
  for m in "${MODULES[@]}"; do echo "$m ${TESTS[$m]}"; done
  exit 0
fi
base="" list=0 budget="${MUTATION_BUDGET:-}" show_max="${MUTATION_SHOW_MAX:-0}"
declare -A BASE=() # module -> the commit its change is measured from
case "${1:-}" in
  --changed)
    [ $# -ge 2 ] || usage
    base="$2"
    shift 2
    ;;
  --ci)
    shift
    budget="${budget:-480}"
    show_max="${MUTATION_SHOW_MAX:-20}"
    base="${MUTATION_BASE:-}"
    if [ -z "$base" ]; then
      base_file="$repo/.ci/mutation-base"
      [ -f "$base_file" ] || { echo "mutation.sh: .ci/mutation-base is missing (or set MUTATION_BASE)" >&2; exit 2; }
      while read -r m c _; do
        case "$m" in '' | '#'*) continue ;; esac
        [ -n "${TESTS[$m]+x}" ] && [ -n "$c" ] || { echo "mutation.sh: .ci/mutation-base: bad line '$m $c'" >&2; exit 2; }
        BASE[$m]="$c"
      done <"$base_file"
      base="(.ci/mutation-base)"
    fi
    ;;
esac
if [ -n "$base" ]; then
  [ "${1:-}" = "--list" ] && { list=1; shift; }
  [ $# -eq 0 ] || usage
fi
[[ "$budget" =~ ^[0-9]*$ ]] || { echo "mutation.sh: MUTATION_BUDGET must be a number of seconds" >&2; exit 2; }
[[ "$show_max" =~ ^[0-9]+$ ]] || { echo "mutation.sh: MUTATION_SHOW_MAX must be a number" >&2; exit 2; }

if [ -n "$base" ]; then
  # The core modules whose code or focused tests differ between their base and the work tree: a
  # weakened test is a change too. A base that is not a commit (a typo, a shallow clone without
  # it) is an error, never an empty selection; a module .ci/mutation-base does not list has no
  # measured score, so it is always selected.
  declare -A CHANGED=() # base commit -> the files that differ from it
  declare -A DOCDIFF=() # base commit -> the changed lines of docs/testing.md
  for m in "${MODULES[@]}"; do
    b="${BASE[$m]:-}"
    [ "$base" != "(.ci/mutation-base)" ] && b="$base"
    if [ -z "$b" ]; then
      mods+=("$m")
      echo "[mutation] $m selected: .ci/mutation-base has no line for it" >&2
      continue
    fi
    if [ -z "${CHANGED[$b]+x}" ]; then
      git -C "$repo" rev-parse -q --verify "$b^{commit}" >/dev/null || {
        echo "mutation.sh: base '$b' is not a commit in $repo (a shallow clone? fetch it or set MUTATION_BASE)" >&2
        exit 2
      }
      CHANGED[$b]="$(git -C "$repo" diff --name-only "$b" --)"
      # the lines of docs/testing.md that changed: declaring a mutant equivalent raises a score too
      DOCDIFF[$b]="$(git -C "$repo" diff -U0 "$b" -- docs/testing.md | grep -E '^[-+]' | grep -vE '^(\+\+\+|---) ' || true)"
    fi
    why=""
    for f in "ai_scientist/$m" ${TESTS[$m]}; do
      if grep -qxF "$f" <<<"${CHANGED[$b]}"; then why="$f changed"; break; fi
    done
    dotted="ai_scientist.${m%.py}"
    if [ -z "$why" ] && grep -qF "\`${dotted//\//.}.x" <<<"${DOCDIFF[$b]}"; then
      why="its equivalent mutants in docs/testing.md changed"
    fi
    if [ -n "$why" ]; then
      mods+=("$m")
      echo "[mutation] $m selected: $why since $b" >&2
    fi
  done
  if [ "$list" = 1 ]; then
    [ "${#mods[@]}" -eq 0 ] || printf '%s\n' "${mods[@]}"
    exit 0
  fi
  if [ "${#mods[@]}" -eq 0 ]; then echo "[mutation] no core module or its focused tests changed since $base"; exit 0; fi
else
  for arg in "$@"; do
    case "$arg" in -h | --help | --list | --ci | --changed) usage ;; esac
    m="${arg#ai_scientist/}"
    [ -n "${TESTS[$m]+x}" ] || { echo "mutation.sh: unknown module '$arg'" >&2; usage; }
    mods+=("$m")
  done
  [ "${#mods[@]}" -gt 0 ] || mods=("${MODULES[@]}")
fi

# The time each module took when last measured (docs/testing.md's Scores table, "1m11s"), in
# seconds; 0 when it has none. With a budget, modules run shortest first so the most fit.
recorded_secs() {
  local t
  t="$(grep -E "^\| \`$1\` \|.* [0-9]+m[0-9]{2}s \|$" "$repo/docs/testing.md" 2>/dev/null | head -1 |
    grep -oE '[0-9]+m[0-9]{2}s \|$' || true)" # the first row of its that ends in a time
  [[ "$t" =~ ^([0-9]+)m([0-9]+)s ]] && echo $((BASH_REMATCH[1] * 60 + 10#${BASH_REMATCH[2]})) || echo 0
}
if [ -n "$budget" ]; then
  mapfile -t mods < <(for m in "${mods[@]}"; do echo "$(recorded_secs "$m") $m"; done | sort -n -s -k1,1 | cut -d' ' -f2)
  echo "[mutation] budget ${budget}s for: ${mods[*]}"
fi

if [ -n "${MUTATION_REV:-}" ]; then # resolved once: every module is measured on the same commit
  MUTATION_REV="$(git -C "$repo" rev-parse -q --verify "$MUTATION_REV^{commit}")" ||
    { echo "mutation.sh: MUTATION_REV is not a commit" >&2; exit 2; }
  echo "[mutation] measuring commit $MUTATION_REV"
fi
if ! "$py" -c 'import mutmut' 2>/dev/null; then
  echo "mutation.sh: mutmut is not installed for $py; run scripts/setup.sh --with-test-tools" \
    "(or: .venv/bin/pip install -e '.[dev]')" >&2
  exit 2
fi
mutmut_bin="$(dirname "$py")/mutmut"

tmp="$(mktemp -d "${TMPDIR:-/tmp}/ai-scientist-mutation.XXXXXX")"
if [ "${MUTATION_KEEP:-0}" = 1 ]; then
  echo "[mutation] working in $tmp (kept)"
else
  trap 'rm -rf "$tmp"' EXIT
fi

copy_tree() { # $1 = destination: the work tree's tracked and new (non-ignored) files, symlinks kept
  mkdir -p "$1"
  if [ -n "${MUTATION_REV:-}" ]; then
    git -C "$repo" archive "$MUTATION_REV" | tar -x -C "$1"
    return
  fi
  (cd "$repo" && git ls-files -z --cached --others --exclude-standard) |
    (cd "$repo" && "$py" -c '
import os, shutil, sys
dest = sys.argv[1]
for rel in sys.stdin.buffer.read().decode().split("\0"):
    if not rel or not os.path.lexists(rel):
        continue
    out = os.path.join(dest, rel)
    os.makedirs(os.path.dirname(out) or ".", exist_ok=True)
    shutil.copy2(rel, out, follow_symlinks=False)
' "$1")
}

results="$tmp/results.tsv"
skipped="$tmp/skipped.txt"
: >"$results"
: >"$skipped"
t0=$(date +%s)
for m in "${mods[@]}"; do
  limit=()
  if [ -n "$budget" ]; then
    left=$((budget - ($(date +%s) - t0)))
    est="$(recorded_secs "$m")"
    if [ "$left" -le 0 ] || [ "$est" -gt "$left" ]; then
      echo "[mutation] SKIPPED $m: last measured ${est}s, ${left}s left of the ${budget}s budget (run it alone: scripts/mutation.sh $m)" | tee -a "$skipped"
      continue
    fi
    limit=(timeout --kill-after=20 "$left") # signals mutmut's whole process group
  fi
  work="$tmp/${m//\//_}"
  copy_tree "$work"
  tests=()
  for t in ${TESTS[$m]}; do [ -f "$work/$t" ] && tests+=("$t"); done # an older MUTATION_REV may lack some
  [ "${#tests[@]}" -gt 0 ] || { echo "mutation.sh: no focused test file for $m exists" >&2; exit 1; }
  {
    echo "[mutmut]"
    echo "source_paths = ai_scientist"
    echo "only_mutate = ai_scientist/$m"
    echo "pytest_add_cli_args_test_selection ="
    for t in "${tests[@]}"; do echo "    $t"; done
    printf 'pytest_add_cli_args =\n    -p\n    no:cacheprovider\n'  # one argument per line
    echo "use_git_change_detection = false"
    echo "also_copy ="  # tests read files beside the package (bfts_config.yaml, examples/, prompt/)
    for e in "$work"/*; do
      case "${e##*/}" in ai_scientist | tests | setup.cfg) ;; *) echo "    ${e##*/}" ;; esac
    done
  } >"$work/setup.cfg"
  echo "[mutation] $m: mutmut run with ${tests[*]}"
  start=$(date +%s)
  run_rc=0
  (cd "$work" && HYPOTHESIS_PROFILE=mutation "${limit[@]}" "$mutmut_bin" run --max-children "$jobs" >"$work/mutmut-run.log" 2>&1) || run_rc=$?
  if [ "${#limit[@]}" -gt 0 ] && { [ "$run_rc" = 124 ] || [ "$run_rc" = 137 ]; }; then
    echo "[mutation] SKIPPED $m: stopped unfinished after $(($(date +%s) - start))s, at the end of the ${budget}s budget (run it alone: scripts/mutation.sh $m)" | tee -a "$skipped"
    continue
  fi
  if [ "$run_rc" != 0 ]; then
    echo "mutation.sh: mutmut failed for $m; last lines of its log:" >&2
    tail -20 "$work/mutmut-run.log" >&2
    exit 1
  fi
  (cd "$work" && "$mutmut_bin" results --all true >"$work/results.txt")
  echo -e "$m\t$work\t$(($(date +%s) - start))" >>"$results"
done

# Score table and survivors (file:line of the first changed line, then the diff).
"$py" - "$results" "$repo/docs/testing.md" "$mutmut_bin" "$min_score" "$skipped" "$show_max" <<'PY'
import ast, re, subprocess, sys
from pathlib import Path

results, doc, mutmut_bin, min_score = sys.argv[1], Path(sys.argv[2]), sys.argv[3], float(sys.argv[4])
skipped = Path(sys.argv[5]).read_text().splitlines()
show_max = int(sys.argv[6])  # survivors listed per module, 0 = all (each `mutmut show` takes seconds)
DETECTED = {"killed", "timeout", "segfault", "caught by type check"}

equivalent = set()
if doc.exists():
    section = re.split(r"^#+ Equivalent mutants.*$", doc.read_text(), maxsplit=1, flags=re.M)
    if len(section) == 2:
        body = re.split(r"^#+ ", section[1], maxsplit=1, flags=re.M)[0]
        equivalent = set(re.findall(r"`(ai_scientist\.[^`\s]+__mutmut_\d+)`", body))


def func_start(src_path, name):
    """First line (decorators included) of the function a mutant name points to."""
    key = name.rsplit("__mutmut_", 1)[0].rsplit(".", 1)[1]  # x_func or xǁClassǁmethod
    parts = key.split("ǁ")
    cls, func = (parts[1], parts[2]) if len(parts) == 3 else (None, key[2:])
    tree = ast.parse(Path(src_path).read_text())
    scope = tree.body
    if cls:
        scope = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls).body
    fn = next(n for n in scope if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == func)
    return min([fn.lineno] + [d.lineno for d in fn.decorator_list])


def locate(work, name, module):
    diff = subprocess.run([mutmut_bin, "show", name], cwd=work, capture_output=True, text=True).stdout
    lines = diff.splitlines()
    line = None
    for i, text in enumerate(lines):
        m = re.match(r"@@ -(\d+)", text)
        if m:
            n = int(m.group(1))
            for t in lines[i + 1 :]:
                if t.startswith(("-", "+")):
                    break
                n += 1
            line = func_start(Path(work) / "ai_scientist" / module, name) + n - 1
            break
    changed = [t for t in lines if t.startswith(("-", "+")) and not t.startswith(("---", "+++"))]
    return line, changed


rows, survivors, failed = [], [], False
for row in Path(results).read_text().splitlines():
    module, work, secs = row.split("\t")
    status = {}
    for text in Path(work, "results.txt").read_text().splitlines():
        name, _, st = text.strip().rpartition(": ")
        if name:
            status[name] = st
    total = len(status)
    detected = sum(s in DETECTED for s in status.values())
    undetected = [n for n, s in status.items() if s not in DETECTED]
    equiv = [n for n in undetected if n in equivalent]
    live = [n for n in undetected if n not in equivalent]
    denom = total - len(equiv)
    score = 100.0 * detected / denom if denom else 100.0
    failed |= score < min_score
    rows.append((module, total, detected, len(equiv), len(live), score, int(secs)))
    for n in live:
        survivors.append((module, work, n, status[n]))

print()
print("| module | mutants | killed | equivalent | survived | score | time |")
print("|---|---|---|---|---|---|---|")
for module, total, det, eq, live, score, secs in rows:
    print(f"| `{module}` | {total} | {det} | {eq} | {live} | {score:.1f} % | {secs // 60}m{secs % 60:02d}s |")
print()
if skipped:  # repeated under the table so a CI log's end shows what was not measured
    print(f"Not measured ({len(skipped)}), not counted as a failure:")
    for text in skipped:
        print("  " + text.removeprefix("[mutation] "))
    print()
if survivors:
    print(f"Survivors ({len(survivors)}):")
listed: dict[str, int] = {}
for module, work, name, st in survivors:
    listed[module] = listed.get(module, 0) + 1
    if show_max and listed[module] > show_max:
        if listed[module] == show_max + 1:
            rest = sum(m == module for m, *_ in survivors) - show_max
            print(f"... {rest} more in {module} (all of them: scripts/mutation.sh {module})")
        continue
    line, changed = locate(work, name, module)
    print(f"ai_scientist/{module}:{line}  {name}  [{st}]")
    for text in changed:
        print(f"    {text}")
sys.exit(1 if failed else 0)
PY
}
main "$@"; exit  # on one line: bash reads no further in this file, which may have changed meanwhile
