"""Live progress: plain lines when not a TTY, a rich panel on a terminal."""

from __future__ import annotations

import io

from ai_scientist.reporting.progress import Progress


class FakeTTY(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_plain_mode_prints_changes_and_events_only():
    out = io.StringIO()
    with Progress(stream=out) as p:
        p.update(stage="1 draft", running=2)
        p.update(tokens=100, cost_usd=0.01)  # token/cost moves alone print nothing new
        p.update(good=1, best={"name": "val_loss", "value": 0.25, "direction": "minimize", "node": "n0003"})
        p.event("stage 2 started: baseline tuning")
    lines = out.getvalue().splitlines()
    assert len(lines) == 4, lines
    assert "stage 1 draft | nodes running 2 / good 0 / buggy 0" in lines[0]
    assert "best val_loss=0.25↓ (n0003)" in lines[1]
    assert lines[2].endswith("stage 2 started: baseline tuning")
    assert "final:" in lines[3] and "tokens 100" in lines[3] and "cost $0.0100" in lines[3]


def test_tty_mode_uses_a_live_panel():
    out = FakeTTY()
    p = Progress(stream=out)
    assert p._live is not None
    p.update(stage="3 creative", good=4, buggy=2, tokens=12345, cost_usd=0.5)
    p.event("best node n0006")
    p.close()
    p.close()  # idempotent
    text = out.getvalue()
    assert "3 creative" in text and "12,345" in text and "best node n0006" in text and "$0.5000" in text
    p.update(good=9)  # after close: ignored, no error
