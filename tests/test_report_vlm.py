"""VLM steps: image parts with the right MIME type, and models without vision skipped with a reason."""

from __future__ import annotations

import base64
import io
import json
import sys

import pytest
from PIL import Image
from test_report_support import ScriptedClient, default_responder, refusing_responder, report_cfg

from ai_scientist.base.config import validate
from ai_scientist.base.paths import VLM_FILE, NodePaths
from ai_scientist.execution.subprocess_backend import SubprocessExecutor
from ai_scientist.llm.call import LLMError
from ai_scientist.reporting.images import image_data_url
from ai_scientist.reporting.pipeline import run_reporting
from ai_scientist.reporting.runread import load_run
from ai_scientist.reporting.vlm import NoVision, is_vision_refusal, run_vlm
from ai_scientist.reporting.writeup import ReportOptions


def _without_loop_critiques(run) -> set[str]:
    """Each stage's best node with figures, its critique from the search removed — as in a run
    whose loop made none (the pipeline critiques every node's figures as it goes): the report
    must make it. The ids, from the run's own records."""
    view = load_run(run)
    best = {str(n["id"]) for n in view.best_per_stage().values()}
    best = {nid for nid in best if list(NodePaths(view.node_dir(nid)).plots.glob("*.png"))}
    assert best, "the run has no best node with figures"
    for nid in best:
        (view.node_dir(nid) / VLM_FILE).unlink(missing_ok=True)
    return best


def _decode(url: str) -> tuple[str, Image.Image]:
    head, b64 = url.split(",", 1)
    return head, Image.open(io.BytesIO(base64.b64decode(b64)))


def test_data_url_resizes_and_uses_the_real_format(tmp_path):
    big = tmp_path / "big.png"
    Image.new("RGB", (3000, 1500), (10, 200, 30)).save(big)
    head, img = _decode(image_data_url(big))
    assert head == "data:image/png;base64" and max(img.size) == 1024 and img.size == (1024, 512)
    lying = tmp_path / "actually_jpeg.png"  # extension says PNG, bytes are JPEG
    Image.new("RGB", (100, 80), (200, 10, 10)).save(lying, format="JPEG")
    head, img = _decode(image_data_url(lying))
    assert head == "data:image/jpeg;base64" and img.format == "JPEG"
    tiff = tmp_path / "x.tiff"
    Image.new("RGB", (50, 50), "blue").save(tiff)
    head, img = _decode(image_data_url(tiff))  # not an accepted image type: re-encoded as PNG
    assert head == "data:image/png;base64" and img.format == "PNG"


def test_vlm_critiques_nodes_and_figures(tmp_path, run_copy):
    run = run_copy(tmp_path)
    best = _without_loop_critiques(run)
    cfg = report_cfg(tmp_path)
    client = ScriptedClient(default_responder())
    run_reporting(
        run, cfg, client, SubprocessExecutor(python=sys.executable), options=ReportOptions(tool_path="")
    )
    vlm = json.loads((run / "figures" / "vlm.json").read_text())
    # the search's own critiques are kept; the best nodes without one are critiqued now
    own = {
        p.parent.name for p in run.glob(f"nodes/*/{VLM_FILE}") if json.loads(p.read_text()).get("critique")
    }
    assert set(vlm["nodes"]) == own | best and not own & best
    assert vlm["figures"]["loss_all.png"]["score"] == 6
    vlm_calls = [c for c in client.calls if c["role"] == "vlm_feedback"]
    assert {c["ctx"].node_id for c in vlm_calls} == best | {"run"}


@pytest.mark.parametrize(
    "kind",
    ["local_backend", "client_says_no", "server_refuses"],
)
def test_non_vision_model_is_skipped_with_reason(tmp_path, kind, run_copy):
    run = run_copy(tmp_path)
    _without_loop_critiques(run)  # a node critique to ask for (the figures step did not run)
    (run / "figures").mkdir(exist_ok=True)  # the pipeline made it empty
    cfg = report_cfg(tmp_path)
    if kind == "local_backend":
        cfg = validate({**cfg.model_dump(mode="json"), "llm": {"backend": "local"}})
        client = ScriptedClient(default_responder())
    elif kind == "client_says_no":
        client = ScriptedClient(default_responder(), supports_vision=False)
    else:
        client = ScriptedClient(refusing_responder)
    with pytest.raises(NoVision) as info:
        run_vlm(run, cfg, client)
    saved = json.loads((run / "figures" / "vlm.json").read_text())
    assert saved["skipped"] == str(info.value)
    if kind == "server_refuses":
        assert "image input is not supported" in saved["skipped"] and len(client.calls) == 1
    else:
        assert client.calls == [] and ("local" in saved["skipped"] or "no image input" in saved["skipped"])


def test_pipeline_records_vlm_skip_and_continues(tmp_path, run_copy):
    run = run_copy(tmp_path)
    client = ScriptedClient(refusing_responder)
    out = run_reporting(run, report_cfg(tmp_path), client, SubprocessExecutor(python=sys.executable),
                        options=ReportOptions(tool_path=""))  # fmt: skip
    assert out["plots"]["status"] == "ok"
    assert out["vlm"]["status"] == "skipped" and "not supported" in out["vlm"]["reason"]
    assert out["writeup"]["status"] == "skipped"


def test_vision_refusal_detection():
    assert is_vision_refusal(LLMError("400: this model does not support image input"))
    assert is_vision_refusal(LLMError("Invalid content type. image_url is only supported by certain models"))
    assert is_vision_refusal(LLMError("Qwen/Qwen2-7B is not a multimodal model"))
    assert not is_vision_refusal(LLMError("429 rate limit exceeded"))
    assert not is_vision_refusal(LLMError("invalid JSON in the answer"))
    assert not is_vision_refusal(ValueError("image not supported"))  # only LLM errors count


def test_real_client_vision_unsupported_error_skips(tmp_path, run_copy):
    from test_report_support import real_client

    from ai_scientist.llm.backend import VisionUnsupported, has_images

    run = run_copy(tmp_path)
    _without_loop_critiques(run)
    cfg = report_cfg(tmp_path)

    def responder(messages, schema, ctx, role):
        if has_images(messages):
            raise VisionUnsupported("gpt-3.5-turbo: the model does not accept images (400)", status=400)
        return default_responder()(messages, schema, ctx, role)

    client, backend = real_client(run, cfg, responder)
    with pytest.raises(NoVision, match="does not accept images"):
        run_vlm(run, cfg, client)
    assert backend.calls == 1  # not retried: a refusal is final
    assert "does not accept images" in json.loads((run / "figures" / "vlm.json").read_text())["skipped"]
