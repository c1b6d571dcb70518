"""The plan layer's text (``phases/plan_text.j2``) of a plan that lacks fields: the embedded model's
plans carry no ``risks_and_mitigations``, and under StrictUndefined ``plan.KEY`` made every
tune/improve/ablate node of the main job fail with a TemplateError (found by issue 32's main-job
runs)."""

from __future__ import annotations

from ai_scientist.base.templates import render


def test_a_plan_without_optional_fields_renders():
    plan = {"goal_summary": "tune the learning rate", "dependencies": {"apt": [], "pip": ["numpy"]}}
    text = render("phases/plan_text.j2", plan=plan).strip()
    assert text == "Goal: tune the learning rate\nDependencies: pip: numpy"
    assert render("phases/plan_text.j2", plan={}).strip() == ""
