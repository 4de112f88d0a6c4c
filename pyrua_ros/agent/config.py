"""``PlayConfig``: every setting of one ``pyrualean play`` episode, validated once.

The CLI (``pyrualean play``), the agent node (ROS parameters) and the launch runner all build this one frozen
dataclass; nothing downstream re-checks a mode string. Flags follow PyRUA-Lean's ``play`` (PYRUALEAN-CONTRACT.md
4.2) plus the ``openai`` runtime's flags (4b) and the ROS-specific ones (driver, clock, recording).
Settings that have no meaning for a ROS backend (``rpent_root``, ``cuda_device``, ``codex_*``) are accepted and
recorded, never used.
"""

from __future__ import annotations

import dataclasses
import json
import pathlib
from typing import Any

from pyrua_ros.agent.modes import (
    ARMS,
    CLI_RUNTIMES,
    CLOCK_MODES,
    DRIVERS,
    FEEDBACK_MODES,
    IMAGE_POLICIES,
    PRIMITIVE_SETS,
    ROBOTS,
    RUNTIMES,
    TOOL_CHOICES,
)


class ConfigError(ValueError):
    """A setting is invalid; the message names the setting and its valid values."""


def _choice(name: str, value: Any, choices: tuple) -> None:
    if value not in choices:
        raise ConfigError(f"--{name.replace('_', '-')} must be one of {', '.join(map(str, choices))}; got {value!r}")


@dataclasses.dataclass(frozen=True)
class PlayConfig:
    """One episode's settings (see ``pyrualean play --help`` for each flag)."""

    out: pathlib.Path
    task: int
    suite: str = "libero_goal"
    seed: int = 0
    arm: str = "cells"
    robot: str = "libero"
    runtime: str = "replay"
    replay: pathlib.Path | None = None
    model: str = "DAGroup-PKU/PyRUA-Lean-Coder-v0.1-4B"
    reasoning: str | None = None
    base_url: str | None = None
    api_key_env: str | None = None
    openai_max_tokens: int | None = None
    openai_tool_choice: str | None = None
    openai_temperature: float | None = None
    openai_extra_body: dict | None = None
    openai_request_timeout_s: float = 600.0
    openai_max_retries: int | None = None
    system_prompt: str | None = None
    context_window: int = 65536
    images: str = "on-motion"
    feedback: str = "rich"
    guides: bool = False
    guides_dir: pathlib.Path | None = None
    max_turns: int | None = None
    max_programs: int | None = None
    budget_s: float = 1200.0
    max_episode_steps: int = 10000
    primitives: str = "full"
    vla_endpoint: str | None = None
    sam3_endpoint: str | None = None
    cell_timeout_s: float = 300.0
    driver: str = "sim"
    clock: str = "lockstep"
    video: bool = True
    record: bool = True
    cuda_device: str | None = None
    rpent_root: str | None = None
    libero_type: str = "pro"
    codex_bin: str | None = None
    codex_home: pathlib.Path | None = None
    claude_cli: str | None = None
    cli_network: str = "loopback"
    cli_proxy: str | None = None

    def __post_init__(self):
        _choice("arm", self.arm, ARMS)
        _choice("robot", self.robot, ROBOTS)
        _choice("runtime", self.runtime, RUNTIMES)
        _choice("images", self.images, IMAGE_POLICIES)
        _choice("feedback", self.feedback, FEEDBACK_MODES)
        _choice("primitives", self.primitives, PRIMITIVE_SETS)
        _choice("driver", self.driver, DRIVERS)
        _choice("clock", self.clock, CLOCK_MODES)
        if self.openai_tool_choice is not None:
            _choice("openai_tool_choice", self.openai_tool_choice, TOOL_CHOICES)
        if self.budget_s <= 0:
            raise ConfigError(f"--budget-s must be positive; got {self.budget_s}")
        if self.max_turns is not None and self.max_turns < 1:
            raise ConfigError(f"--max-turns must be at least 1; got {self.max_turns}")
        if self.max_programs is not None and self.max_programs < 1:
            raise ConfigError(f"--max-programs must be at least 1; got {self.max_programs}")
        if self.max_episode_steps < 1:
            raise ConfigError(f"--max-episode-steps must be at least 1; got {self.max_episode_steps}")
        if self.arm == "tools" and self.runtime == "replay":
            raise ConfigError("--arm tools needs a model runtime (--runtime openai, codex or claude); replay replays "
                              "recorded cells or programs")
        if self.runtime in CLI_RUNTIMES:
            from pyrua_ros.agent.runtimes.cli_agent import NETWORK_MODES, is_loopback_url

            _choice("cli_network", self.cli_network, NETWORK_MODES)
            if self.cli_network == "loopback":
                if not self.base_url:
                    raise ConfigError(f"--runtime {self.runtime} needs --base-url on loopback (the CLI reaches only "
                                      "127.0.0.1 by default); pass --cli-network inherit to use the vendor's API")
                if not is_loopback_url(self.base_url):
                    raise ConfigError(f"--base-url {self.base_url} is not on loopback; the CLI runtimes reach only "
                                      "loopback by default (pass --cli-network inherit to allow it)")
        if self.runtime == "openai" and not self.base_url:
            raise ConfigError("--runtime openai needs --base-url (an OpenAI-compatible chat-completions endpoint, "
                              "e.g. http://127.0.0.1:30000/v1)")
        if self.primitives == "full" and not self.vla_endpoint:
            # Like the reference's no-vla mode: without a policy server the VLA skills are absent.
            object.__setattr__(self, "primitives", "no-vla")

    @property
    def budget_mode(self) -> str:
        return "calls" if self.max_turns is not None else "wall"

    @property
    def tag(self) -> str:
        """``goal_t8_s0``-style short name of the cell (suite without ``libero_``)."""
        return f"{self.suite.removeprefix('libero_')}_t{self.task}_s{self.seed}"

    def boot_options(self) -> dict[str, Any]:
        """Settings recorded under result.host.boot_options."""
        return {"driver": self.driver, "clock": self.clock, "vla_endpoint": self.vla_endpoint,
                "sam3_endpoint": self.sam3_endpoint, "libero_type": self.libero_type,
                "cell_timeout_s": self.cell_timeout_s}


def parse_extra_body(text: str | None) -> dict | None:
    """``--openai-extra-body`` JSON object, or None; ConfigError with the parse error otherwise."""
    if text is None or text == "":
        return None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"--openai-extra-body is not valid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise ConfigError(f"--openai-extra-body must be a JSON object; got {type(value).__name__}")
    return value
