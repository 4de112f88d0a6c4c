#!/usr/bin/env python3
"""Write config/agent.yaml from the settings schema (run after adding or changing a setting).

``test/test_settings_schema.py`` fails while the file differs from what this script writes.
"""

import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pyrua_ros.nodes.agent_node import parameters_yaml  # noqa: E402

if __name__ == "__main__":
    path = ROOT / "config" / "agent.yaml"
    path.write_text(parameters_yaml())
    print(f"wrote {path.relative_to(ROOT)}")
