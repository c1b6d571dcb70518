"""Issue 28: a fact is said once per prompt. A capable model's code prompts held the best node's
findings three or four times (recall notes, history, ...); each test runs a scripted pipeline and
reads what the prompts really carried."""

from __future__ import annotations

import json
from typing import Any

from ai_scientist_testing.scripted import ExampleResponder
from pipeline_support import journal_nodes, prompt_records, record_text, start_run


class LongFindings(ExampleResponder):
    """Reviews whose findings are a few sentences long (a capable model's are), naming the node."""

    def _exec_review(self, text: str, ctx: Any) -> str:
        review = json.loads(super()._exec_review(text, ctx))
        review["findings"] += (
            f". Node {ctx.node_id} trained for the configured epochs; the loss fell steadily and"
            " the clean validation accuracy is the headline, measured on the held-out split."
        )
        return json.dumps(review)


def test_a_nodes_findings_appear_once_in_each_code_prompt(tmp_path):
    code, run_dir, _ = start_run(tmp_path, responder=LongFindings())
    assert code == 0
    summaries = {
        nid: n["summary"] for nid, n in journal_nodes(run_dir).items() if len(n.get("summary") or "") >= 80
    }
    assert summaries, "no node has findings long enough to test"
    code_calls = [r for r in prompt_records(run_dir) if r.get("phase") == "phase2"]
    referred = 0
    for rec in code_calls:
        text = record_text(rec)
        for nid, summary in summaries.items():
            probe = summary[:80]
            assert text.count(probe) <= 1, f"{rec.get('node_id')}: {nid}'s findings {text.count(probe)}x"
        referred += text.count('its text is under "History so far"')
    # the recall notes that held them now say where they are (derived: some prompt had both)
    assert referred > 0


class TuneChangesCommand(ExampleResponder):
    """Tunings whose run command changes too (``python3 -B``): a build flag's tuning in C."""

    def _phase2(self, text: str, ctx: Any) -> str:
        answer = json.loads(super()._phase2(text, ctx))
        if "Operation: tune" in text:
            answer["run"]["commands"] = ["/usr/bin/python3 -B experiment.py"]
        return json.dumps(answer)


def test_a_childs_diff_shows_changed_commands_and_says_so(tmp_path):
    """A review or plotting call that shows a child's program as its diff to the parent's: a
    changed run command is in the diff and the header says so; unchanged commands are the
    parent's, said too. Derived from each node's code answer and its parent's."""
    code, run_dir, _ = start_run(tmp_path, responder=TuneChangesCommand())
    assert code == 0
    nodes = journal_nodes(run_dir)

    def commands(nid: str) -> list[str]:
        answer = json.loads((run_dir / "nodes" / nid / "code_answer.json").read_text())
        return answer["build"]["commands"] + answer["run"]["commands"]

    seen = {True: 0, False: 0}
    for rec in prompt_records(run_dir):
        text = record_text(rec)
        if rec.get("phase") not in ("review", "phase5_plot") or "a unified diff" not in text:
            continue
        nid = rec["node_id"]
        changed = commands(nid) != commands(nodes[nid]["parent_id"])
        seen[changed] += 1
        diff = text[text.index("```diff") : text.index("```", text.index("```diff") + 7)]
        if changed:
            assert "its build or run commands changed too" in text
            for c in commands(nid):
                assert f"+run: {c}" in diff or f" run: {c}" in diff
        else:
            assert "the build and run commands too" in text
            assert "+run:" not in diff
    assert seen[True] and seen[False], seen  # both kinds of child were in the run


KNOB_C = """#include <stdio.h>
#define NB 4
static const int TILES[] = {16, 32, 64};
int main(void) {
    int sweep[] = {128, 256, 512}, one[] = {64};
    printf("%d %d %d\\n", TILES[0], sweep[0], one[0] * NB);
    return 0;
}
"""


class CompiledKnobs(ExampleResponder):
    """Experiments with a C helper built with flags: arrays, a #define and compile flags are the
    knobs a tuning of it would sweep."""

    def _phase2(self, text: str, ctx: Any) -> str:
        answer = json.loads(super()._phase2(text, ctx))
        answer["files"].append({"path": "knob.c", "content": KNOB_C, "encoding": "utf-8"})
        answer["build"] = {
            "language": "c",
            "compiler": "gcc",
            "commands": ["gcc -O2 -march=native -funroll-loops -o knob knob.c -lm"],
        }
        return json.dumps(answer)


def test_the_tuning_proposer_sees_c_arrays_defines_and_compile_flags(tmp_path):
    """The idea proposals' parameter list names what the best node's code and build expose: each
    array and #define of its C file and each compile flag of its build command (read here from
    the node's saved code answer, with plain regexes)."""
    import re

    code, run_dir, _ = start_run(tmp_path, responder=CompiledKnobs())
    assert code == 0
    ideas = [r for r in prompt_records(run_dir) if r.get("phase") == "ideas"]
    assert ideas
    for rec in ideas:
        text = record_text(rec)
        best = re.search(r"\b(n\d{4}): ", text[text.index("## ") :]).group(1)
        answer = json.loads((run_dir / "nodes" / best / "code_answer.json").read_text())
        src = next(f["content"] for f in answer["files"] if f["path"].endswith(".c"))
        arrays = re.findall(r"(\w+)\[\]\s*=\s*\{([^}]*)\}", src)
        defines = re.findall(r"#define (\w+) (\S+)", src)
        (build,) = answer["build"]["commands"]
        words = build.split()
        flags = [w for w in words if w.startswith(("-O", "-m", "-f"))]
        assert arrays and defines and flags
        for name, values in arrays:
            assert f"{name} = {{{', '.join(v.strip() for v in values.split(','))}}}" in text, name
        for name, value in defines:
            assert f"{name} = {value} [knob.c]" in text
        assert f"gcc flags (build command 1): {' '.join(flags)}" in text
        assert "-lm" not in text.split("gcc flags")[1].split("\n")[0]  # a library, not a knob


def test_code_parameters_of_cpp_and_python_arrays_and_build_flags():
    """The forms the relay runs' programs used: several C declarators on a line, arrays holding a
    name (``n``), std::vector, enum constants, a zero-fill left out; Python lists of numbers
    (any case, ``np.array``); gcc/g++ flags of each compiler call without paths or libraries,
    ``-D`` defines and ``CFLAGS=`` assignments."""
    from ai_scientist.treesearch.parameters import code_parameters

    c = (
        "enum { REPS = 3 };\nint main(void) {\n  double buf[1024] = {0};\n"
        "  int sweep[] = {16, 32, n}, one[] = {64};\n  std::vector<int> sizes = {256, 512};\n}\n"
    )
    py = "import numpy as np\ntiles = [16, 32]\nLRS = np.array([0.1, 0.01])\nnames = ['a', 'b']\n"
    build = {
        "language": "c",
        "commands": [
            "gcc -O3 -march=native -DNB=4 -I inc -o mm mm.c -lm -Wall",
            "CFLAGS='-O2' make && g++-12 -std=c++17 -fopenmp x.cpp -o x",
        ],
    }
    lines = code_parameters({"mm.cpp": c, "exp.py": py}, build=build)
    for expected in (
        "REPS = 3 [mm.cpp]",
        "sweep = {16, 32, n} (an array of values in the code) [mm.cpp]",
        "one = {64} (an array of values in the code) [mm.cpp]",
        "sizes = {256, 512} (an array of values in the code) [mm.cpp]",
        "tiles = [16, 32] (an array of values in the code) [exp.py]",
        "LRS = [0.1, 0.01] (an array of values in the code) [exp.py]",
        "NB = 4 [build.commands]",
        "gcc flags (build command 1): -O3 -march=native [build.commands]",
        "CFLAGS = -O2 [build.commands]",
        "g++-12 flags (build command 2): -std=c++17 -fopenmp [build.commands]",
    ):
        assert expected in lines, (expected, lines)
    assert not any(line.startswith(("buf", "names")) for line in lines)


def test_a_winner_inside_the_seed_noise_is_called_a_tie(tmp_path):
    """A stage whose re-ranking kept a node by a seed mean within the noise band of another node's
    mean (recomputed here from the stored record: z x sigma x sqrt(1/n + 1/m)) is a tie in its
    summary call's facts ("Within noise: ..." with the band; "Node kept", not "Best node") and in
    the "Previous stages" heading of every later prompt ("kept", not "best"); a clear winner
    is neither."""
    import math

    code, run_dir, _ = start_run(tmp_path)
    assert code == 0
    records = prompt_records(run_dir)
    ties = {True: 0, False: 0}
    for path in sorted((run_dir / "stage_summaries").glob("stage*.json")):
        data = json.loads(path.read_text())
        rr, stage = data.get("seed_rerank") or {}, data["stage"]
        means, sigma = rr.get("means") or {}, (rr.get("noise") or {}).get("sigma")
        won = means.get(rr.get("chosen") or rr.get("node_id"))
        tie = bool(
            won
            and sigma is not None
            and any(
                abs(won["mean"] - m["mean"]) <= rr["noise_z"] * sigma * math.sqrt(1 / won["n"] + 1 / m["n"])
                for nid, m in means.items()
                if m and nid != (rr.get("chosen") or rr.get("node_id"))
            )
        )
        ties[tie] += 1
        (call,) = [r for r in records if r.get("phase") == "summary" and r.get("label") == f"stage{stage}"]
        facts = record_text(call)
        assert ("Within noise:" in facts) is tie, stage
        assert ("(a tie within the seed noise" in facts) is tie, stage
        later = [r for r in records if f"### Stage {stage} (" in record_text(r)]
        assert later or stage == 4
        for r in later:
            head = record_text(r).split(f"### Stage {stage} (")[1].split("\n")[0]
            assert ("a tie within the seed noise" in head) is tie, head
            assert (f"; best {data['best_node']} " in head) is not tie, head
    assert ties[True] and ties[False], ties  # the run had both


class NoisySummaries(ExampleResponder):
    """Stage summaries that quote the seed noise as it stood at their stage's end (a capable
    model's do: "seed sigma 13.88, within the 39.25 noise band")."""

    def __call__(self, messages: list[dict[str, Any]], schema: dict | None, ctx: Any) -> str:
        if ctx.phase != "summary":
            return super().__call__(messages, schema, ctx)
        text = "\n".join(m["content"] for m in messages if isinstance(m.get("content"), str))
        # the figure the facts give at this stage's end, quoted as the model would
        sigma = __import__("re").search(r"seed noise sigma ([\d.e-]+)", text)
        quoted = f"seed sigma {sigma.group(1)}, a tie" if sigma else "no noise estimate yet"
        return json.dumps({"tried": "two settings", "worked": quoted, "failed": "none", "next": "keep"})


def test_an_earlier_stages_noise_figure_is_labelled_with_its_stage(tmp_path):
    """Every noise figure an earlier stage's stored summary quotes reaches a later prompt labelled
    "(stage N's estimate)", never bare; a prompt whose evaluation protocol gives the current
    estimate says which one to use. Figures read from the stored summaries."""
    import re

    code, run_dir, _ = start_run(tmp_path, responder=NoisySummaries())
    assert code == 0
    quoted = set()
    for path in (run_dir / "stage_summaries").glob("stage*.json"):
        data = json.loads(path.read_text())
        for value in re.findall(r"sigma ([\d.e-]*\d)", json.dumps(data.get("summary") or {})):
            quoted.add((value, data["stage"]))
    assert quoted
    checked = noted = 0
    for rec in prompt_records(run_dir):
        text = record_text(rec)
        if "## Previous stages" not in text:
            continue
        section = text.split("## Previous stages", 1)[1].split("\n## ", 1)[0]
        for value, stage in quoted:
            if f"### Stage {stage} (" in section:
                checked += 1
                assert f"sigma {value} (stage {stage}'s estimate)" in section
        # no figure in the section is bare
        for m in re.finditer(r"sigma [\d.e-]*\d", section):
            assert section[m.end() :].startswith(" (stage "), section[m.start() : m.end() + 30]
        if "seed noise of val_accuracy: sigma" in text and "'s estimate)" in section:
            assert 'the current one is under "Evaluation protocol"' in text
            noted += 1
    assert checked and noted


CONTROL = """
import json as _json

_m = _json.load(open("metrics.json"))
_m["metrics"].append({"name": "val_accuracy_nonoise_control", "value": 0.9, "direction": "maximize",
                      "dataset": "synthetic"})
_json.dump(_m, open("metrics.json", "w"))
print("no-noise control: val_accuracy=0.9000")
"""


class MeasuresAControl(ExampleResponder):
    """Programs that also measure a no-noise control inside their own run (a metric and a line)."""

    def _phase2(self, text: str, ctx: Any) -> str:
        answer = json.loads(super()._phase2(text, ctx))
        answer["files"][0]["content"] += CONTROL
        return json.dumps(answer)


def test_the_ablation_proposer_sees_what_the_best_node_measured_itself(tmp_path):
    """The ablation-ideas call names the ablations the best node already measured inside its own
    run: its metrics whose names say so and its output lines reporting one — read here from the
    best node's journal metrics and run.json."""
    import re

    code, run_dir, _ = start_run(tmp_path, responder=MeasuresAControl())
    assert code == 0
    nodes = journal_nodes(run_dir)
    (rec,) = [r for r in prompt_records(run_dir) if r.get("phase") == "ideas" and r.get("label") == "ablate"]
    text = record_text(rec)
    best = re.search(r"Best node so far: (n\d{4})", text).group(1)
    line = next(x for x in text.splitlines() if x.startswith("Already measured by the best node"))
    control = [m for m in nodes[best]["metrics"] if "control" in m["name"]]
    assert control
    for m in control:
        assert f"{m['name']}={m['value']:.6g}" in line
    run = json.loads((run_dir / "nodes" / best / "run.json").read_text())
    printed = [x for o in run["outputs"] for x in o["stdout_tail"].splitlines() if "control" in x]
    assert printed and all(f'"{x.strip()}"' in line for x in printed)
    metrics_part = line.split("its output:")[0]
    assert f" {nodes[best]['metric']['name']}=" not in metrics_part  # the headline is no ablation
    assert "No ablation node has run in this stage yet (the best node's own measurements are above)" in text


def test_a_tie_needs_two_measured_means():
    """The band is z x sigma x sqrt(1/n + 1/m): a node with no good re-run (n=0, or no entry) is
    never level with the winner, and a gap beyond the band is no tie."""
    from ai_scientist.runloop.stage_facts import rerank_tie

    record = {
        "chosen": "n1",
        "noise": {"sigma": 1.0},
        "noise_z": 2.0,
        "means": {
            "n1": {"mean": 10.0, "n": 2},
            "n2": {"mean": 9.9, "n": 0},
            "n3": None,
            "n4": {"mean": 7.9, "n": 2},
        },
    }
    assert rerank_tie(record) is None  # 2.1 apart, band 2 x 1 x sqrt(1/2 + 1/2) = 2
    record["means"]["n4"]["mean"] = 8.0
    tie = rerank_tie(record)
    assert tie is not None and [o["node_id"] for o in tie["level"]] == ["n4"]
    assert abs(tie["level"][0]["band"] - 2.0) < 1e-12
