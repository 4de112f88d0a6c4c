"""One episode's run directory read back as typed records for the viewer: the header facts, the prompt, and each
tool turn with the model's reasoning, the code, the result, the images it saw and the ``robo`` calls it made.

Sources, all optional (a missing or unreadable one is listed in :attr:`EpisodeView.problems`, never raised):
``result.json``, ``card.json`` + its images, ``prompt.txt``, ``tool_turns.json``, ``calls.jsonl``,
``workspace/cell_NNN.py`` / ``program_NN.py``, ``episode.mp4`` + ``episode_video.json`` (when each turn began, in
video seconds), and the conversation: ``transcript.json`` (chat messages of the ``openai`` and ``replay``
runtimes) or ``codex_events.jsonl`` / ``claude_events.jsonl`` (the CLI runtimes', and the reference PyRUA-Lean's
run directories, which have the same names). The i-th tool call of the conversation is the i-th row of
``tool_turns.json`` (every call the toolkit served is one turn); a CLI's own built-in tools (shell, Read) are not.

A run directory is hostile data: every file is read with a size cap, every JSON value is checked for its type
before use, an image is kept only when it is base64 PNG/JPEG/GIF/WebP, and nothing outside the run directory is
read (a path a record names is never followed).
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import json
import re
from pathlib import Path
from typing import Any

MAX_FILE_BYTES = 64 * 2**20     # a record larger than this is not read
MAX_IMAGE_BYTES = 4 * 2**20     # an image larger than this is not embedded
IMAGE_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp")
_DATA_URI = re.compile(r"data:(image/[a-z]+);base64,([A-Za-z0-9+/=\s]+)\Z")
_ATTACHED = re.compile(r"Images attached to the result of the (\S+) call (\S+):")
CODE_TOOLS = ("python", "run_program")


@dataclasses.dataclass(frozen=True)
class Image:
    """An image the model saw: ``name``, a checked ``data:`` URI (None when it was not kept), a ``note``."""

    name: str
    data_uri: str | None = None
    note: str = ""


@dataclasses.dataclass(frozen=True)
class Exchange:
    """One tool call as the model made it: its ``reasoning`` and ``message`` (of the response that made it, on its
    first call), ``tool`` and ``arguments``, the ``result`` text it got back and the ``images`` attached."""

    tool: str
    arguments: dict[str, Any]
    reasoning: str = ""
    message: str = ""
    result: str = ""
    images: tuple[Image, ...] = ()
    call_id: str = ""


@dataclasses.dataclass(frozen=True)
class TurnView:
    """Turn ``index`` (0-based, as tool_turns.json): its ``record`` (the tool_turns.json row, empty when none), the
    ``exchange``, the ``code`` it ran (and the workspace file it came from), its ``robo`` ``calls`` (calls.jsonl
    rows) and ``video_s``, when the turn began in ``episode.mp4`` [s]."""

    index: int
    tool: str
    record: dict[str, Any]
    exchange: Exchange | None
    code: str | None
    code_file: str | None
    calls: tuple[dict[str, Any], ...]
    video_s: float | None


@dataclasses.dataclass(frozen=True)
class EpisodeView:
    """Everything the viewer shows of one run directory (see the module docstring)."""

    run_dir: Path
    result: dict[str, Any]
    card: dict[str, Any]
    prompt: str
    prompt_images: tuple[Image, ...]
    turns: tuple[TurnView, ...]
    unplaced_calls: tuple[dict[str, Any], ...]
    final_message: str
    video: Path | None
    video_index: dict[str, Any]
    runtime: str
    problems: tuple[str, ...]

    @property
    def calls(self) -> tuple[dict[str, Any], ...]:
        """Every ``robo`` call, in order."""
        return tuple(c for t in self.turns for c in t.calls) + self.unplaced_calls


# ---------------------------------------------------------------------------------------------------- files
class _Reader:
    """Reads files of one run directory, keeping what went wrong."""

    def __init__(self, run_dir: Path):
        self.run_dir = run_dir
        self.problems: list[str] = []

    def path(self, name: str) -> Path | None:
        """``run_dir/name`` when it is a regular file inside the run directory (no link leads out)."""
        path = self.run_dir / name
        try:
            if path.is_symlink() or not path.is_file():
                return None
            path.resolve().relative_to(self.run_dir.resolve())
        except (OSError, ValueError):
            return None
        return path

    def bytes(self, name: str, limit: int = MAX_FILE_BYTES) -> bytes | None:
        path = self.path(name)
        if path is None:
            return None
        try:
            if path.stat().st_size > limit:
                self.problems.append(f"{name} is larger than {limit // 2**20} MiB; not read")
                return None
            return path.read_bytes()
        except OSError as exc:
            self.problems.append(f"{name} could not be read: {exc}")
            return None

    def text(self, name: str) -> str | None:
        data = self.bytes(name)
        return None if data is None else data.decode("utf-8", "replace")

    def json(self, name: str, kind: type) -> Any:
        text = self.text(name)
        if text is None:
            return None
        try:
            data = json.loads(text)
        except ValueError as exc:
            self.problems.append(f"{name} is not valid JSON: {exc}")
            return None
        if not isinstance(data, kind):
            self.problems.append(f"{name} holds a {type(data).__name__}, expected a {kind.__name__}")
            return None
        return data

    def jsonl(self, name: str) -> list[dict[str, Any]] | None:
        text = self.text(name)
        if text is None:
            return None
        rows, bad = [], 0
        for line in text.splitlines():
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except ValueError:
                bad += 1
                continue
            if isinstance(row, dict):
                rows.append(row)
            else:
                bad += 1
        if bad:
            self.problems.append(f"{name}: {bad} line(s) are not JSON objects; skipped")
        return rows


def _str(value: Any) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def image_from_base64(name: str, media_type: str, data: str) -> Image:
    """An :class:`Image` from base64 text when it decodes and is a kept type and size; else one with a note."""
    if media_type not in IMAGE_TYPES:
        return Image(name, None, f"{media_type or 'unknown type'} not shown")
    compact = re.sub(r"\s+", "", data)
    if len(compact) * 3 // 4 > MAX_IMAGE_BYTES:
        return Image(name, None, f"larger than {MAX_IMAGE_BYTES // 2**20} MiB; not embedded")
    try:
        base64.b64decode(compact, validate=True)
    except (binascii.Error, ValueError):
        return Image(name, None, "not valid base64; not shown")
    return Image(name, f"data:{media_type};base64,{compact}")


def image_from_uri(name: str, uri: Any) -> Image:
    """An :class:`Image` from a ``data:image/...;base64,...`` URI (anything else is not shown)."""
    match = _DATA_URI.match(uri) if isinstance(uri, str) else None
    if match is None:
        return Image(name, None, "not an inline image; not shown")
    return image_from_base64(name, match.group(1), match.group(2))


def image_from_file(reader: _Reader, name: str) -> Image:
    """An :class:`Image` of a PNG/JPEG file inside the run directory."""
    data = reader.bytes(name, MAX_IMAGE_BYTES)
    if data is None:
        return Image(Path(name).name, None, "missing")
    kind = "image/png" if data[:8] == b"\x89PNG\r\n\x1a\n" else "image/jpeg" if data[:3] == b"\xff\xd8\xff" else ""
    if not kind:
        return Image(Path(name).name, None, "not a PNG or JPEG; not shown")
    return Image(Path(name).name, f"data:{kind};base64,{base64.b64encode(data).decode('ascii')}")


# ---------------------------------------------------------------------------------------------------- conversations
def _arguments(raw: Any) -> dict[str, Any]:
    if isinstance(raw, dict):
        return raw
    if isinstance(raw, str):
        try:
            value = json.loads(raw)
        except ValueError:
            return {"(unparsed arguments)": raw}
        return value if isinstance(value, dict) else {"(arguments)": value}
    return {}


def _text_of(content: Any) -> str:
    """The text parts of a chat message's content (a string or a list of parts)."""
    if isinstance(content, str):
        return content
    return "\n".join(_str(p.get("text")) for p in _list(content) if isinstance(p, dict) and p.get("type") == "text")


def chat_exchanges(messages: list[Any]) -> tuple[list[Exchange], str, tuple[Image, ...]]:
    """Exchanges from chat messages (``openai`` / ``replay`` ``transcript.json``), the final assistant text, and the
    images of the first user message (the card, as the model got it)."""
    calls: list[dict[str, Any]] = []
    by_id: dict[str, dict[str, Any]] = {}
    final, first_images, seen_user = "", (), False
    for message in messages:
        if not isinstance(message, dict):
            continue
        role = message.get("role")
        content = message.get("content")
        if role == "user" and not seen_user:
            seen_user = True
            parts = [p for p in _list(content) if isinstance(p, dict) and p.get("type") == "image_url"]
            first_images = tuple(image_from_uri(f"card image {i + 1}", _dict(p.get("image_url")).get("url"))
                                 for i, p in enumerate(parts))
            if not parts and isinstance(message.get("images"), int) and message["images"]:
                first_images = tuple(Image(f"card image {i + 1}", None, "not kept in the transcript")
                                     for i in range(min(message["images"], 16)))
        elif role == "assistant":
            tool_calls = [c for c in _list(message.get("tool_calls")) if isinstance(c, dict)]
            reasoning = _str(message.get("reasoning_content") or message.get("reasoning"))
            text = _text_of(content)
            if not tool_calls:
                final = text or final
            for i, call in enumerate(tool_calls):
                function = _dict(call.get("function"))
                row = {"tool": _str(function.get("name")), "arguments": _arguments(function.get("arguments")),
                       "reasoning": reasoning if i == 0 else "", "message": text if i == 0 else "",
                       "result": "", "images": [], "call_id": _str(call.get("id"))}
                calls.append(row)
                by_id.setdefault(row["call_id"], row)
        elif role == "tool":
            row = by_id.get(_str(message.get("tool_call_id")))
            if row is not None:
                row["result"] = _text_of(content)
                count = message.get("images")
                if isinstance(count, int) and count > 0:   # the replay runtime keeps only the count
                    row["images"] = [Image(f"image {i + 1}", None, "not kept in the transcript")
                                     for i in range(min(count, 16))]
        elif role == "user" and isinstance(content, list):
            target = None
            for part in content:
                if not isinstance(part, dict):
                    continue
                if part.get("type") == "text":
                    match = _ATTACHED.match(_str(part.get("text")))
                    target = by_id.get(match.group(2)) if match else None
                elif part.get("type") == "image_url" and target is not None:
                    target["images"].append(image_from_uri(f"image {len(target['images']) + 1}",
                                                           _dict(part.get("image_url")).get("url")))
    return [_exchange(row) for row in calls], final, first_images


def _exchange(row: dict[str, Any]) -> Exchange:
    return Exchange(tool=row["tool"], arguments=row["arguments"], reasoning=row["reasoning"], message=row["message"],
                    result=row["result"], images=tuple(row["images"]), call_id=row["call_id"])


def _tool(name: str) -> str:
    return name.rsplit("__", 1)[-1] if name.startswith("mcp__") else name


def _mcp_content(content: Any, name: str) -> tuple[str, list[Image]]:
    """Text and images of an MCP tool result's content blocks (codex and claude spell images differently)."""
    if isinstance(content, str):
        return content, []
    texts, images = [], []
    for block in _list(content):
        if not isinstance(block, dict):
            continue
        if block.get("type") == "text":
            texts.append(_str(block.get("text")))
        elif block.get("type") == "image":
            source = _dict(block.get("source"))
            label = f"image {len(images) + 1}"
            data = block.get("data") if isinstance(block.get("data"), str) else source.get("data")
            media = _str(block.get("mimeType") or block.get("mime_type") or source.get("media_type"))
            if isinstance(data, str):
                images.append(image_from_base64(label, media, data))
            else:
                images.append(Image(label, None, "not kept in the event log"))
    return "\n".join(texts), images


def codex_exchanges(events: list[dict[str, Any]]) -> tuple[list[Exchange], str]:
    """Exchanges from ``codex_events.jsonl`` (``codex exec --json``): ``mcp_tool_call`` items, with the
    ``reasoning`` and ``agent_message`` items before each one."""
    out: list[Exchange] = []
    reasoning: list[str] = []
    message, final = "", ""
    for event in events:
        if event.get("type") != "item.completed":
            continue
        item = _dict(event.get("item"))
        kind = item.get("type")
        if kind == "reasoning":
            reasoning.append(_str(item.get("text")))
        elif kind == "agent_message":
            message = final = _str(item.get("text"))
        elif kind == "mcp_tool_call":
            result = _dict(item.get("result"))
            text, images = _mcp_content(result.get("content"), _str(item.get("tool")))
            error = item.get("error")
            if error and not text:
                text = _str(_dict(error).get("message") or error)
            out.append(Exchange(tool=_tool(_str(item.get("tool"))), arguments=_arguments(item.get("arguments")),
                                reasoning="\n\n".join(r for r in reasoning if r), message=message, result=text,
                                images=tuple(images), call_id=_str(item.get("id"))))
            reasoning, message = [], ""
    return out, final


def claude_exchanges(events: list[dict[str, Any]]) -> tuple[list[Exchange], str]:
    """Exchanges from ``claude_events.jsonl`` (stream-json messages): MCP ``tool_use`` blocks (the CLI's own
    Read/Glob/Grep are not turns) with the ``thinking`` and ``text`` blocks before them, results from the
    ``tool_result`` blocks that answer them."""
    rows: list[dict[str, Any]] = []
    by_id: dict[str, dict[str, Any]] = {}
    thinking: list[str] = []
    texts: list[str] = []
    final = ""
    for event in events:
        message = _dict(event.get("message"))
        if event.get("type") == "assistant":
            for block in _list(message.get("content")):
                if not isinstance(block, dict):
                    continue
                kind = block.get("type")
                if kind == "thinking":
                    thinking.append(_str(block.get("thinking")))
                elif kind == "text":
                    texts.append(_str(block.get("text")))
                    final = texts[-1]
                elif kind == "tool_use" and _str(block.get("name")).startswith("mcp__"):
                    row = {"tool": _tool(_str(block.get("name"))), "arguments": _dict(block.get("input")),
                           "reasoning": "\n\n".join(t for t in thinking if t), "message": "\n\n".join(texts),
                           "result": "", "images": [], "call_id": _str(block.get("id"))}
                    rows.append(row)
                    by_id[row["call_id"]] = row
                    thinking, texts = [], []
        elif event.get("type") == "user":
            for block in _list(message.get("content")):
                if isinstance(block, dict) and block.get("type") == "tool_result":
                    row = by_id.get(_str(block.get("tool_use_id")))
                    if row is not None:
                        row["result"], row["images"] = _mcp_content(block.get("content"), row["tool"])
    return [_exchange(row) for row in rows], final


# ---------------------------------------------------------------------------------------------------- turns
def _workspace_files(reader: _Reader, pattern: str) -> dict[int, str]:
    folder = reader.run_dir / "workspace"
    found = {}
    try:
        names = sorted(p.name for p in folder.iterdir()) if folder.is_dir() and not folder.is_symlink() else []
    except OSError:
        names = []
    for name in names:
        match = re.fullmatch(pattern, name)
        if match:
            found[int(match.group(1))] = f"workspace/{name}"
    return found


def _number_from_result(result: str, key: str, ordinal: int) -> int | None:
    """The cell / program number a JSON tool result names (None: the call was refused and ran nothing); a result
    that is not such a JSON object says nothing, so the turn's ``ordinal`` stands."""
    try:
        data = json.loads(result)
    except ValueError:
        return ordinal
    if not isinstance(data, dict):
        return ordinal
    value = data.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _code_of(reader: _Reader, tool: str, exchange: Exchange | None, ordinal: int) -> tuple[str | None, str | None]:
    """(code, workspace file) of a turn: the call's own ``code`` argument, else the workspace file the kernel
    saved, numbered as the call's result says (a refused call ran nothing: no file), or, with no result recorded,
    by the turn's place among the arm's code calls."""
    args = exchange.arguments if exchange is not None else {}
    if tool not in CODE_TOOLS:
        return None, None
    key, pattern = ("cell", r"cell_(\d+)\.py") if tool == "python" else ("program", r"program_(\d+)\.py")
    number = _number_from_result(exchange.result, key, ordinal) if exchange is not None and exchange.result \
        else ordinal
    name = _workspace_files(reader, pattern).get(number) if number is not None else None
    code = args.get("code")
    if isinstance(code, str) and code:
        return code, name
    if name is not None:
        return reader.text(name), name
    return None, None


def _turn_calls(calls: list[dict[str, Any]], record: dict[str, Any]) -> tuple[dict[str, Any], ...] | None:
    first, count = record.get("first_call"), record.get("calls")
    if not (isinstance(first, int) and isinstance(count, int)) or first < 0 or count < 0:
        return None
    return tuple(c for c in calls if isinstance(c.get("index"), int) and first <= c["index"] < first + count)


def _video_times(index: dict[str, Any]) -> dict[int, float]:
    """``{turn number (1-based): video second}`` from ``episode_video.json``."""
    times = {}
    for row in _list(index.get("turns")):
        if isinstance(row, dict) and isinstance(row.get("turn"), int) and isinstance(row.get("video_s"), int | float):
            times.setdefault(row["turn"], float(row["video_s"]))
    return times


def load_episode(run_dir: Path | str) -> EpisodeView:
    """Read ``run_dir`` (a play / run / mcp run directory, ours or the reference's); FileNotFoundError when it holds
    no ``result.json``."""
    run_dir = Path(run_dir)
    if run_dir.is_file() and run_dir.name == "result.json":
        run_dir = run_dir.parent
    reader = _Reader(run_dir)
    if reader.path("result.json") is None:
        raise FileNotFoundError(f"{run_dir}: no result.json (not a run directory)")
    result = reader.json("result.json", dict) or {}
    card = reader.json("card.json", dict) or {}
    runtime = _str(_dict(result.get("host")).get("runtime") or _dict(result.get("generation")).get("runtime"))
    exchanges: list[Exchange] = []
    final, first_images = "", ()
    transcript = reader.json("transcript.json", list)
    if transcript and any(isinstance(m, dict) and "role" in m for m in transcript):
        exchanges, final, first_images = chat_exchanges(transcript)
    else:
        for name, parse in (("codex", codex_exchanges), ("claude", claude_exchanges)):
            if (runtime in ("", name)) and reader.path(f"{name}_events.jsonl") is not None:
                exchanges, final = parse(reader.jsonl(f"{name}_events.jsonl") or [])
                runtime = runtime or name
                break
    last = reader.text("last_message.md")
    final = last.strip() if last and last.strip() else final
    records = [r for r in (reader.json("tool_turns.json", list) or []) if isinstance(r, dict)]
    calls = reader.jsonl("calls.jsonl") or []
    video_index = reader.json("episode_video.json", dict) or {}
    times = _video_times(video_index)
    count = max(len(records), len(exchanges))
    if records and exchanges and len(records) != len(exchanges):
        reader.problems.append(f"tool_turns.json has {len(records)} turn(s), the conversation {len(exchanges)} tool "
                               "call(s); matched in order")
    turns, placed, ordinals = [], set(), {"python": 0, "run_program": 0}
    for i in range(count):
        record = records[i] if i < len(records) else {}
        exchange = exchanges[i] if i < len(exchanges) else None
        tool = _str(record.get("tool")) or (exchange.tool if exchange else "?")
        if tool in ordinals:
            ordinals[tool] += 1
        code, code_file = _code_of(reader, tool, exchange, ordinals.get(tool, 0))
        if code is None and exchange is not None and tool not in CODE_TOOLS and tool != "finish":
            code = f"robo.{tool}(" + ", ".join(f"{k}={v!r}" for k, v in exchange.arguments.items()) + ")"
        own = _turn_calls(calls, record)
        if own is not None:
            placed.update(id(c) for c in own)
        turns.append(TurnView(index=i, tool=tool, record=record, exchange=exchange, code=code, code_file=code_file,
                              calls=own or (), video_s=times.get(i + 1)))
    unplaced = tuple(c for c in calls if id(c) not in placed)
    prompt_images = first_images
    card_images = _dict(card.get("images"))
    if card_images:
        inside = [p for p in card_images.values()
                  if isinstance(p, str) and not Path(p).is_absolute() and ".." not in Path(p).parts]
        prompt_images = tuple(image_from_file(reader, path) for path in inside)
    video = reader.path("episode.mp4")
    return EpisodeView(run_dir=run_dir, result=result, card=card, prompt=reader.text("prompt.txt") or "",
                       prompt_images=prompt_images, turns=tuple(turns), unplaced_calls=unplaced, final_message=final,
                       video=video, video_index=video_index, runtime=runtime, problems=tuple(reader.problems))


__all__ = ["EpisodeView", "Exchange", "Image", "TurnView", "chat_exchanges", "claude_exchanges", "codex_exchanges",
           "image_from_base64", "image_from_uri", "load_episode"]
