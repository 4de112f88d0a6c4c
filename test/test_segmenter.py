"""Prompt/point matching of the ground-truth segmenter and the HTTP segmentation client (against a local server)."""

import base64
import http.server
import json
import threading

import numpy as np
import pytest

from pyrua_ros.robo.backend import SegmentationFrame
from pyrua_ros.robo.codecs import decode_png, encode_png
from pyrua_ros.robo.segmenters import (
    GroundTruthSegmenter,
    HttpSegmenter,
    Segmenter,
    SegmentRequest,
    score_label,
    split_relation,
    tokens,
)

pytestmark = pytest.mark.unit   # the fast lane: no driver node, no LIBERO (pytest -m unit)

N = 40
# id -> (label, rows, cols, world xy of the block)
BLOCKS = {
    1: ("akita_black_bowl_1", (2, 8), (2, 8), (0.30, -0.30)),
    2: ("akita_black_bowl_2", (30, 36), (30, 36), (-0.10, 0.25)),
    3: ("flat_stove_1", (28, 38), (20, 28), (-0.12, 0.18)),
    4: ("flat_stove_1_burner", (30, 33), (22, 25), (-0.12, 0.18)),
    5: ("cream_cheese_1", (12, 16), (12, 20), (0.0, 0.0)),
    6: ("wine_bottle_1", (18, 22), (2, 5), (0.1, -0.2)),
    7: ("wine_rack_1", (18, 26), (6, 12), (0.12, -0.15)),
    8: ("plate_1", (2, 8), (30, 38), (0.0, 0.3)),
    9: ("white_bowl_1", (20, 24), (30, 34), (0.05, 0.05)),
    10: ("robot", (36, 40), (0, 4), (-0.3, 0.0)),
}


def scene():
    ids = np.zeros((N, N), np.int32)
    world = np.zeros((N, N, 3), np.float32)
    for pid, (_, (r0, r1), (c0, c1), (x, y)) in BLOCKS.items():
        ids[r0:r1, c0:c1] = pid
        world[r0:r1, c0:c1] = (x, y, 0.95)
    labels = {pid: b[0] for pid, b in BLOCKS.items()}
    return SegmentationFrame(ids, labels, 0.0, "agentview", "high"), world


def run(prompt=None, point=None, min_score=0.2, world=True):
    seg, wmap = scene()
    req = SegmentRequest("agentview", "high", np.zeros((N, N, 3), np.uint8), prompt, point, min_score,
                         wmap if world else None, seg)
    return GroundTruthSegmenter().segment(req)


def test_tokens_drop_instance_numbers_stopwords_and_plurals():
    assert tokens("akita_black_bowl_1") == ["akita", "black", "bowl"]
    assert tokens("The two boxes of Mugs") == ["two", "box", "cup"]
    assert tokens("chefmate_8_frypan") == ["chefmate", "pan"]


def test_split_relation():
    assert split_relation("the black bowl on the stove") == ("the black bowl", "on", ["the stove"])
    assert split_relation("bowl between the plate and the ramekin")[1:] == ("between", ["the plate", "the ramekin"])
    assert split_relation("cream cheese box") == ("cream cheese box", None, [])
    assert split_relation("the bowl in front of the plate")[1] == "in front of"


@pytest.mark.parametrize(("head", "label", "low", "high"), [
    ("black bowl", "akita_black_bowl_1", 0.95, 1.0),
    ("plate", "plate_1", 1.0, 1.0),
    ("the cream cheese box", "cream_cheese_1", 1.0, 1.0),
    ("wine bottle", "wine_bottle_1", 1.0, 1.0),
    ("wine bottle", "wine_rack_1", 0.3, 0.4),
    ("black bowl", "white_bowl_1", 0.25, 0.35),
    ("stove burner", "flat_stove_1", 0.35, 0.4),
    ("stove burner", "flat_stove_1_burner", 0.95, 1.0),
    ("elephant", "plate_1", 0.0, 0.0),
])
def test_score_label(head, label, low, high):
    assert low <= score_label(head, label) <= high


def test_object_prompt_includes_parts_and_picks_the_specific_label():
    res = run("the wine bottle")
    assert res.found and res.label == "wine_bottle_1" and res.score == 1.0
    stove = run("stove")
    assert stove.label == "flat_stove_1" and stove.mask.sum() == 10 * 8       # burner pixels included


def test_part_prompt_keeps_only_the_part():
    res = run("stove burner")
    assert res.found and res.label == "flat_stove_1_burner" and res.mask.sum() == 9


def test_relation_resolves_among_instances_by_proximity():
    assert run("the black bowl on the stove").label == "akita_black_bowl_2"
    assert run("the black bowl next to the wine rack").label == "akita_black_bowl_1"
    assert run("the black bowl near the stove", world=False).label == "akita_black_bowl_2"   # pixel fallback
    res = run("the black bowl on the stove")
    assert [c.label for c in res.instances] == ["akita_black_bowl_2", "akita_black_bowl_1"]


def test_without_relation_the_largest_visible_instance_wins():
    seg, wmap = scene()
    seg.ids[2:10, 2:10] = 1     # bowl 1 grows
    req = SegmentRequest("agentview", "high", np.zeros((N, N, 3), np.uint8), "black bowl", None, 0.2, wmap, seg)
    assert GroundTruthSegmenter().segment(req).label == "akita_black_bowl_1"


def test_not_found_is_a_result_with_the_reference_reason_and_an_operator_detail():
    """The model reads RPent's SAM3 wording (robots/libero/sam3_server.py ``_select_top``); the labels behind the
    answer are only in ``detail``."""
    res = run("purple elephant")
    assert not res.found and res.error == "SAM3 returned no candidate" and "purple elephant" in res.detail
    low = run("wine glass", min_score=0.5)
    assert low.found is False and low.error == f"top score {low.score:.3f} is below min_score 0.500"
    assert "min_score 0.5" in low.detail and "wine" not in low.error
    seg, wmap = scene()
    seg.ids[seg.ids == 8] = 0   # the plate is occluded
    req = SegmentRequest("agentview", "high", np.zeros((N, N, 3), np.uint8), "plate", None, 0.2, wmap, seg)
    hidden = GroundTruthSegmenter().segment(req)
    assert hidden.error == "SAM3 returned no candidate" and "not visible" in hidden.detail


def test_robot_is_not_matched_unless_asked():
    assert run("the thing").found is False
    assert run("grey thing").found is False
    assert run("robot gripper").label == "robot"


def test_point_selects_the_object_under_the_pixel():
    res = run(point=(31, 23))                      # on the burner: the whole stove
    assert res.found and res.label == "flat_stove_1" and res.score == 1.0
    assert run(point=(0, 39)).found is False
    both = run("black bowl", point=(32, 32))
    assert both.label == "akita_black_bowl_2"
    mismatch = run("plate", point=(14, 14))
    assert mismatch.label == "cream_cheese_1" and mismatch.score < 0.2


def test_protocol():
    assert isinstance(GroundTruthSegmenter(), Segmenter) and isinstance(HttpSegmenter("http://x"), Segmenter)


@pytest.fixture
def mask_server():
    """A local HTTP mask service: the mask is every pixel whose red channel is 255."""
    seen = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            seen.append(body)
            img = decode_png(base64.b64decode(body["image_png_b64"]))
            mask = (img[..., 0] == 255).astype(np.uint8) * 255
            found = bool(mask.any())
            reply = {"found": found, "score": 0.8 if found else 0.01, "label": body["prompt"],
                     "mask_png_b64": base64.b64encode(encode_png(np.dstack([mask] * 3))).decode() if found else None,
                     "error": None if found else "no mask"}
            data = json.dumps(reply).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, name="mask-server", daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/segment", seen
    server.shutdown()
    server.server_close()
    thread.join(timeout=5)


def test_http_segmenter_round_trip(mask_server):
    url, seen = mask_server
    color = np.zeros((N, N, 3), np.uint8)
    color[5:9, 10:20, 0] = 255
    req = SegmentRequest("wrist", "high", color, "red block", (6, 12), 0.3)
    res = HttpSegmenter(url, timeout_s=5).segment(req)
    assert res.found and res.score == 0.8 and res.mask.sum() == 40 and res.label == "red block"
    assert seen[0]["point"] == [6, 12] and seen[0]["min_score"] == 0.3
    none = HttpSegmenter(url, timeout_s=5).segment(SegmentRequest("wrist", "high", np.zeros((N, N, 3), np.uint8),
                                                                  "red block", None, 0.3))
    assert not none.found and none.error == "no mask"


def test_http_segmenter_unreachable_names_the_url():
    with pytest.raises(ConnectionError, match=r"segmentation service http://127\.0\.0\.1:9/"):
        HttpSegmenter("http://127.0.0.1:9/", timeout_s=2).segment(
            SegmentRequest("wrist", "high", np.zeros((4, 4, 3), np.uint8), "x", None, 0.2))
