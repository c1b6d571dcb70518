"""Context-retention benchmark: which context policy keeps the facts an agent needs?

A seeded synthetic run of N steps (default 500). Each step is one assistant
response (sometimes with ``<think>`` text and ``<memory_update>`` blocks) and one
tool output (sometimes a large JSON payload). Labelled facts are planted:

* ``constraint``  — stated once in the task at step 0, must persist (pinned);
* ``static``      — stated once in a response or a small tool output;
* ``static_json`` — stated once deep inside a large JSON tool output;
* ``updated``     — a key whose value changes several times (the latest counts);
* ``thinking``    — appears only inside thinking tags: must never reach a prompt;
* near-duplicate distractors of static facts (one character off) are mixed in.

A pinned violation is a probe whose prompt lacks a constraint or the instructions.

Every step is one LLM call; at probe steps each policy's prompt is scored by
exact match of the fact values. Policies: naive accumulate-everything, seed 000's
last-4000-chars, seed 001's last-20-messages, first-fit section packing (the HPC
fork), ours (``ai_scientist.context.assemble``), plus equal-token-cost variants of
the window baselines. recoverability@5: share of facts missing from our prompt
that ``MemoryStore.archival_search`` (FTS + exact lanes) returns in its top 5.

    python bench/context_retention.py [--steps 500] [--seed 0] [--out bench/results/context_retention.json]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ai_scientist.base.config import Config
from ai_scientist.context import Budget, assemble, counter_for, strip_reasoning
from ai_scientist.context.tokens import messages_tokens

MODEL = "gpt-4o-mini"
PROBE_EVERY = 25
AGE_BUCKETS = [(0, 25), (25, 100), (100, 250), (250, 10**9)]
WORDS = ("model loss batch epoch metric data seed grad layer run tune eval plot error value "
         "config result train test split baseline improve check shape tensor step").split()  # fmt: skip
SYSTEM = "You are an AI research scientist running experiments step by step."
INSTRUCTIONS = "Decide the next step. Respect every constraint. Answer in JSON."


@dataclass
class Fact:
    kind: str
    key: str
    value: str
    step: int
    updates: list[tuple[int, str]] = field(default_factory=list)  # updated facts: (step, value)

    def value_at(self, t: int) -> tuple[str, int] | None:
        if self.kind != "updated":
            return (self.value, self.step) if self.step <= t else None
        seen = [(v, s) for s, v in self.updates if s <= t]
        return seen[-1] if seen else None


@dataclass
class Step:
    assistant: str
    tool: str


def _filler(rng: random.Random, n_words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n_words))


def _token(rng: random.Random, prefix: str) -> str:
    return f"{prefix}{rng.randrange(16**6):06x}"


def _near(value: str) -> str:
    last = value[-1]
    return value[:-1] + ("0" if last != "0" else "1")


def generate(seed: int, n_steps: int) -> tuple[str, list[Fact], list[Step]]:
    """The task text, the planted facts and the step stream (deterministic in ``seed``)."""
    rng = random.Random(seed)
    facts: list[Fact] = []
    constraints = [Fact("constraint", f"constraint_{i}", _token(rng, f"cst{i}-"), 0) for i in range(6)]
    facts += constraints
    task = (
        "# Idea: does warm-up help tiny MLPs?\n"
        + _filler(rng, 120)
        + "\n\n## Constraints\n"
        + "\n".join(f"- rule {c.key}: obey policy {c.value} at all times" for c in constraints)
    )
    plan: dict[int, list[tuple[str, Fact]]] = {}

    def put(step: int, where: str, fact: Fact) -> None:
        plan.setdefault(step, []).append((where, fact))

    for i in range(int(n_steps * 0.16)):
        f = Fact("static", f"dataset_{i}.path", _token(rng, f"ds{i}-"), rng.randrange(1, n_steps))
        facts.append(f)
        put(f.step, rng.choice(["assistant", "tool"]), f)
        if rng.random() < 0.5:  # a near-duplicate distractor appears later
            put(min(n_steps - 1, f.step + rng.randrange(1, 60)), "distractor", f)
    for i in range(int(n_steps * 0.08)):
        f = Fact("static_json", f"artifact_{i}.sha", _token(rng, f"sha{i}-"), rng.randrange(1, n_steps))
        facts.append(f)
        put(f.step, "json", f)
    for i in range(8):
        steps = sorted(rng.sample(range(1, n_steps), 8))
        f = Fact("updated", f"best_param_{i}", "", steps[0])
        f.updates = [(s, _token(rng, f"v{i}-")) for s in steps]
        facts.append(f)
        for s, v in f.updates:
            put(s, "update", Fact("updated", f.key, v, s))
    for i in range(int(n_steps * 0.1)):
        f = Fact("thinking", f"hunch_{i}", _token(rng, f"th{i}-"), rng.randrange(1, n_steps))
        facts.append(f)
        put(f.step, "thinking", f)
    steps = [_step(rng, s, plan.get(s, [])) for s in range(n_steps)]
    return task, facts, steps


def _step(rng: random.Random, s: int, planted: list[tuple[str, Fact]]) -> Step:
    think = [f"I wonder whether {f.key} matters: {f.value}." for w, f in planted if w == "thinking"]
    if rng.random() < 0.5:
        think.append(_filler(rng, 60))
    said = [f"Found {f.key} = /data/{f.value}.csv" for w, f in planted if w == "assistant"]
    said += [
        f"Possibly stale mirror of {f.key} = /data/{_near(f.value)}.csv"
        for w, f in planted
        if w == "distractor"
    ]
    ops = [{"op": "core_set", "key": f.key, "value": f.value} for w, f in planted if w == "update"]
    ops += [{"op": "core_set", "key": f.key, "value": f.value} for w, f in planted if w in ("assistant", "tool", "json")
            and rng.random() < 0.5]  # fmt: skip  # the agent saves about half of what it finds
    parts = [f"<think>{' '.join(think)}</think>"] if think else []
    if ops:
        parts.append(f"<memory_update>{json.dumps(ops)}</memory_update>")
    parts.append(f"Step {s}: " + " ".join(said) + " " + _filler(rng, rng.randrange(60, 140)))
    parts += [f"Updated {f.key} to {f.value}." for w, f in planted if w == "update"]
    tool_facts = [f for w, f in planted if w == "tool"]
    json_facts = [f for w, f in planted if w == "json"]
    if json_facts or rng.random() < 0.12:
        items = [{"id": j, "title": _filler(rng, 4), "content": _filler(rng, rng.randrange(50, 110)),
                  "meta": {"score": round(rng.random(), 3)}} for j in range(rng.randrange(20, 60))]  # fmt: skip
        for f in json_facts:  # deep inside: a random item's nested meta
            items[rng.randrange(len(items))]["meta"]["note"] = f"{f.key} is {f.value}"
        log = [f"{f.key} located at /data/{f.value}.csv" for f in tool_facts]
        tool = json.dumps(
            {"status": "ok", "results": items, "log": log, "metadata": {"freshness": f"step {s}"}}
        )
    else:
        tool = f"exit 0\n{_filler(rng, rng.randrange(20, 60))}\n" + "".join(
            f"{f.key} located at /data/{f.value}.csv\n" for f in tool_facts
        )
    return Step("\n".join(parts), tool)


# ----------------------------------------------------------------- policies ----

Msg = dict[str, Any]


class World:
    """Everything the policies may read at step t (steps < t have happened)."""

    def __init__(self, task: str, steps: list[Step], cfg: Config):
        self.task, self.steps, self.cfg = task, steps, cfg
        self._hist: dict[tuple[int, bool], str] = {}
        self.counter = counter_for(MODEL)
        self.budget = Budget.from_config(cfg.context)
        first = f"{task}\n\n{INSTRUCTIONS}"
        self.msgs: list[Msg] = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": first}]
        for st in steps:
            self.msgs.append({"role": "assistant", "content": st.assistant})
            self.msgs.append({"role": "user", "content": f"Tool output:\n{st.tool}"})
        self.msg_tokens = [
            messages_tokens([m], self.counter) - messages_tokens([], self.counter) for m in self.msgs
        ]
        self.raw_entries = [f"{st.assistant}\n{st.tool}" for st in steps]
        self.our_entries = [self._our_entry(i, st) for i, st in enumerate(steps)]
        self.core_after = self._core_history()

    def _our_entry(self, i: int, st: Step) -> str:
        from ai_scientist.context import PolicyParams, get_layer_policy

        clean, _ = strip_reasoning(st.assistant)
        try:  # the memory protocol moves <memory_update> blocks into memory; the state keeps the rest
            from ai_scientist.memory.protocol import strip_memory_blocks

            clean = strip_memory_blocks(clean)
        except ImportError:
            pass
        res = get_layer_policy("json_preview").prepare(st.tool, PolicyParams(), f"step{i}/tool")
        return f"{clean}\n{res[0] if res else st.tool}"

    def _core_history(self) -> list[dict[str, str]]:
        """Core memory after each step, from the <memory_update> blocks (oldest keys evicted at the cap)."""
        core: dict[str, str] = {}
        out = []
        for st in self.steps:
            for key, value in _memory_sets(st.assistant):
                core.pop(key, None)
                core[key] = value
            while sum(len(k) + len(v) + 3 for k, v in core.items()) > self.cfg.memory.core_max_chars:
                core.pop(next(iter(core)))
            out.append(dict(core))
        return out

    def core_text(self, t: int) -> str:
        core = self.core_after[t - 1] if t > 0 else {}
        return "\n".join(f"{k}: {v}" for k, v in core.items())

    def history(self, t: int, ours: bool) -> str:
        key = (t, ours)
        if key not in self._hist:  # every policy at step t reads the same joined text
            if len(self._hist) > 4:
                self._hist.clear()
            self._hist[key] = "\n\n".join((self.our_entries if ours else self.raw_entries)[:t])
        return self._hist[key]

    def prefix(self, t: int) -> list[Msg]:
        return self.msgs[: 2 + 2 * t]

    def tokens(self, msgs: list[Msg]) -> int:
        return messages_tokens(msgs, self.counter)


def _memory_sets(text: str) -> list[tuple[str, str]]:
    try:
        from ai_scientist.memory.protocol import parse_memory_update
    except ImportError:
        parse_memory_update = None
    if parse_memory_update is not None:
        return [
            (op.args["key"], op.args["value"]) for op in parse_memory_update(text).ops if op.op == "core_set"
        ]
    out = []
    for block in re.findall(r"<memory_update>(.*?)</memory_update>", text, re.S):
        out += [(op["key"], op["value"]) for op in json.loads(block) if op.get("op") == "core_set"]
    return out


def p_naive(w: World, t: int) -> list[Msg]:
    return w.prefix(t)


def _tail_prompt(w: World, t: int, chars: int) -> list[Msg]:
    state = w.history(t, ours=False)
    body = f"Problem:\n{w.task}\n\nCurrent state:\n{state[-chars:] if chars else ''}\n\n{INSTRUCTIONS}"
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": body}]


def p_tail4000(w: World, t: int) -> list[Msg]:
    return _tail_prompt(w, t, 4000)


def p_last20(w: World, t: int) -> list[Msg]:
    msgs = w.prefix(t)
    return msgs[:2] + msgs[-20:] if len(msgs) > 25 else msgs


def p_firstfit(w: World, t: int, hist_chars: int = 4000, budget: int | None = None) -> list[Msg]:
    """HPC-fork style: sections in a fixed order, packed until the first that overflows."""
    last_tool = w.steps[t - 1].tool if t else ""
    history = w.history(t, ours=False)
    sections = [("Memory", w.core_text(t)), ("Task", w.task), ("History", history[len(history) - hist_chars :]),
                ("Execution output", last_tool), ("Instructions", INSTRUCTIONS)]  # fmt: skip
    room = (budget or w.budget.max_tokens) - w.tokens(
        [{"role": "system", "content": SYSTEM}, {"role": "user", "content": ""}]
    )
    kept = []
    for title, text in sections:
        cost = w.counter.count(f"## {title}\n{text}\n\n")
        if cost > room:
            break  # the fork's behaviour: everything after the first misfit is silently lost
        kept.append(f"## {title}\n{text}")
        room -= cost
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "\n\n".join(kept)}]


def p_ours(w: World, t: int, cfg: Config | None = None) -> list[Msg]:
    cfg = cfg or w.cfg
    values = {
        "task": w.task,
        "memory": w.core_text(t),
        "history": w.history(t, ours=True),
        "execution_output": w.steps[t - 1].tool if t else "",
        "instructions": INSTRUCTIONS,
        "response_format": "JSON object with keys plan, code.",
    }
    handles = {"execution_output": f"step{t - 1}/tool"}
    return assemble("phase234_code", values, w.budget, w.counter, cfg.context, handles=handles).messages


# ours with the history tail sized by the token budget instead of the seed's fixed 4000 chars
FILL_CFG = Config.model_validate({"context": {"policies": {"tail_window_chars": 10**7}}})


def p_ours_fill(w: World, t: int) -> list[Msg]:
    return p_ours(w, t, FILL_CFG)


def p_tail_equal(w: World, t: int, target: int) -> list[Msg]:
    lo, hi = 0, min(len(w.history(t, ours=False)), 8 * target)
    while lo < hi:  # largest tail that costs no more than ours did
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if w.tokens(_tail_prompt(w, t, mid)) <= target else (lo, mid - 1)
    return _tail_prompt(w, t, lo)


def p_firstfit_equal(w: World, t: int, target: int) -> list[Msg]:
    lo, hi = 0, min(len(w.history(t, ours=False)), 8 * target)
    while lo < hi:  # the longest history window whose first-fit prompt costs no more than ours
        mid = (lo + hi + 1) // 2
        msgs = p_firstfit(w, t, mid, target)
        fits = "## History" in msgs[1]["content"] and w.tokens(msgs) <= target
        lo, hi = (mid, hi) if fits else (lo, mid - 1)
    return p_firstfit(w, t, lo, target)


def p_last_equal(w: World, t: int, target: int) -> list[Msg]:
    msgs = w.prefix(t)
    used, keep = w.tokens(msgs[:2]), 0
    for tok in reversed(w.msg_tokens[2 : len(msgs)]):
        if used + tok > target:
            break
        used, keep = used + tok, keep + 1
    return msgs[:2] + (msgs[len(msgs) - keep :] if keep else [])


# ------------------------------------------------------------------ archive ----


class Archive:
    """Archival memory fed with every step (reasoning stripped; large outputs split by item)."""

    def __init__(self, folder: Path):
        try:
            from ai_scientist.memory.store import MemoryStore
        except ImportError:
            self.store = None
            return
        self.store = MemoryStore(folder / "memory.sqlite", embedder=None)

    def add(self, step: Step) -> None:
        if self.store is None:
            return
        texts = [strip_reasoning(step.assistant)[0]]
        try:
            data = json.loads(step.tool)
        except json.JSONDecodeError:
            texts.append(step.tool)
        else:
            texts += [json.dumps(item) for item in data.get("results", [])]
            texts += data.get("log", [])
        self.store.archival_many(None, [t for t in texts if t.strip()])

    def recovers(self, key: str, value: str, k: int = 5) -> bool:
        return any(value in hit.text for hit in self.store.archival_search(key, k=k))


# ------------------------------------------------------------------ scoring ----


def _bucket(age: int) -> str:
    for lo, hi in AGE_BUCKETS:
        if lo <= age < hi:
            return f"{lo}-{hi - 1}" if hi < 10**9 else f"{lo}+"
    return "?"


class Score:
    def __init__(self) -> None:
        self.hits: dict[str, list[int]] = {}  # label -> [kept, total]
        self.pinned_violations = 0
        self.thinking_leaks = 0
        self.cumulative_tokens = 0
        self.calls = 0

    def add(self, label: str, ok: bool) -> None:
        h = self.hits.setdefault(label, [0, 0])
        h[0] += int(ok)
        h[1] += 1

    def rate(self, label: str) -> float | None:
        h = self.hits.get(label)
        return None if not h or not h[1] else h[0] / h[1]


def score_probe(score: Score, facts: list[Fact], text: str, t: int) -> list[Fact]:
    """Score one prompt at probe step t; returns the facts that were missing."""
    missing, pinned_ok = [], True
    for f in facts:
        seen = f.value_at(t - 1)
        if seen is None:
            continue
        value, since = seen
        present = value in text
        if f.kind == "thinking":
            score.thinking_leaks += int(present)
            continue
        score.add("all", present)
        score.add(f"kind:{f.kind}", present)
        score.add(f"age:{_bucket(t - since)}", present)
        if f.kind == "constraint" and not present:
            pinned_ok = False
        if not present:
            missing.append(f)
    if INSTRUCTIONS not in text:  # the instructions are pinned content too
        pinned_ok = False
    score.pinned_violations += int(not pinned_ok)
    return missing


# --------------------------------------------------------------------- main ----

FIXED = {"naive": p_naive, "tail4000": p_tail4000, "last20": p_last20, "firstfit": p_firstfit, "ours": p_ours,
         "ours_fill": p_ours_fill}  # fmt: skip
EQUAL = {"tail@ours_tokens": p_tail_equal, "last_msgs@ours_tokens": p_last_equal,
         "firstfit@ours_tokens": p_firstfit_equal}  # fmt: skip


def run(n_steps: int, seed: int) -> dict[str, Any]:
    cfg = Config()
    task, facts, steps = generate(seed, n_steps)
    w = World(task, steps, cfg)
    scores = {name: Score() for name in [*FIXED, *EQUAL]}
    recover = [0, 0]
    base = w.tokens([])
    cum_msg = [0]
    for tok in w.msg_tokens:
        cum_msg.append(cum_msg[-1] + tok)
    with tempfile.TemporaryDirectory() as tmp:
        archive = Archive(Path(tmp))
        for t in range(1, n_steps + 1):
            archive.add(steps[t - 1])
            probe = t % PROBE_EVERY == 0
            prompts: dict[str, list[Msg]] = {}
            for name, fn in FIXED.items():
                if name == "naive":
                    tokens = base + cum_msg[2 + 2 * t]
                    if probe:
                        prompts[name] = fn(w, t)
                else:
                    prompts[name] = fn(w, t)
                    tokens = w.tokens(prompts[name])
                scores[name].cumulative_tokens += tokens
            target = w.tokens(prompts["ours_fill"])
            for name, fn in EQUAL.items():
                prompts[name] = fn(w, t, target)
                scores[name].cumulative_tokens += w.tokens(prompts[name])
            if not probe:
                continue
            for name, msgs in prompts.items():
                text = "\n".join(str(m.get("content")) for m in msgs)
                missing = score_probe(scores[name], facts, text, t)
                if name == "ours_fill" and archive.store is not None:
                    for f in missing:
                        value, _ = f.value_at(t - 1)
                        recover[0] += int(archive.recovers(f.key, value))
                        recover[1] += 1
    return _report(scores, recover, n_steps, seed, archive.store is not None)


def _report(
    scores: dict[str, Score], recover: list[int], n_steps: int, seed: int, measured: bool
) -> dict[str, Any]:
    naive = scores["naive"].cumulative_tokens
    out: dict[str, Any] = {"steps": n_steps, "seed": seed, "probe_every": PROBE_EVERY, "model_tokenizer": MODEL,
                           "policies": {}}  # fmt: skip
    for name, sc in scores.items():
        out["policies"][name] = {
            "retention": sc.rate("all"),
            "by_kind": {k[5:]: sc.rate(k) for k in sorted(sc.hits) if k.startswith("kind:")},
            "by_age": {k[4:]: sc.rate(k) for k in sorted(sc.hits, key=_age_order) if k.startswith("age:")},
            "pinned_violations": sc.pinned_violations,
            "thinking_leaks": sc.thinking_leaks,
            "cumulative_prompt_tokens": sc.cumulative_tokens,
            "tokens_vs_naive": sc.cumulative_tokens / naive,
        }
    out["recoverability_at_5"] = (
        (recover[0] / recover[1] if recover[1] else None) if measured else "not measured"
    )
    out["recoverability_pairs"] = recover[1]
    return out


def _age_order(label: str) -> int:
    m = re.search(r"(\d+)", label)
    return int(m.group(1)) if m else 0


def print_table(res: dict[str, Any]) -> None:
    kinds = ["constraint", "static", "static_json", "updated"]
    ages = list(next(iter(res["policies"].values()))["by_age"])
    head = f"{'policy':<22}{'retain':>7}" + "".join(f"{k[:11]:>12}" for k in kinds)
    head += "".join(f"{'age ' + a:>11}" for a in ages) + f"{'pinViol':>8}{'leaks':>7}{'tok/naive':>10}"
    print(head)
    for name, p in res["policies"].items():
        pct = lambda v: "   -" if v is None else f"{100 * v:5.1f}%"  # noqa: E731
        row = f"{name:<22}{pct(p['retention']):>7}" + "".join(
            f"{pct(p['by_kind'].get(k)):>12}" for k in kinds
        )
        row += "".join(f"{pct(p['by_age'].get(a)):>11}" for a in ages)
        row += f"{p['pinned_violations']:>8}{p['thinking_leaks']:>7}{100 * p['tokens_vs_naive']:>9.1f}%"
        print(row)
    rec = res["recoverability_at_5"]
    shown = "n/a (none missing)" if rec is None else rec if isinstance(rec, str) else f"{100 * rec:.1f}%"
    print(f"recoverability@5 of facts missing from ours: {shown}"
          f" ({res['recoverability_pairs']} probe/fact pairs)")  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=500)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / "context_retention.json"))
    ap.add_argument(
        "--smoke",
        action="store_true",
        help="tiny sizes, only to show the script runs (tests/test_bench_smoke.py); writes no results file",
    )
    args = ap.parse_args(argv)
    if args.smoke:
        args.steps, args.out = 30, os.devnull
    started = time.time()
    res = run(args.steps, args.seed)
    res["elapsed_s"] = round(time.time() - started, 1)
    print_table(res)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(res, indent=2) + "\n")
    print(f"results: {out}  ({res['elapsed_s']} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
