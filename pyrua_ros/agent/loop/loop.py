"""The agent loop: ask the model, execute its tool calls, send the results back, until it finishes.

Who must act on a failure decides what happens (STYLE-ANCHORS habit 4):
- the model's mistakes (no tool call, unknown tool, arguments that are not JSON, a cell that raises) become a
  tool or user message and the loop goes on;
- infrastructure failures (the model server is unreachable after retries, the wall-clock budget is spent) end
  the loop with a status and a reason;
- our own bugs propagate, and the episode host still writes result.json in its ``finally``.

``finish`` ends the loop deterministically once its tool result has been recorded. Several tool calls in one
response run in order; calls after a ``finish`` are answered with an error and not run.
"""

from __future__ import annotations

import time

from pyrua_ros.agent.runtimes.base import LoopOutcome, RuntimeFailure

NO_TOOL_CALL_NUDGE = ("Your last reply contained no tool call. Continue by calling `{tool}` with code, or call "
                      "`finish` with a status and a one-sentence summary to end the episode.")
MAX_SILENT_REPLIES = 3


def run_loop(runtime, toolkit, *, deadline: float, first_prompt: str, first_images: list[bytes],
             tool_name: str, on_request=None) -> LoopOutcome:
    """Drive ``runtime`` against ``toolkit`` until finish, budget end or an unrecoverable runtime failure.

    ``deadline`` is a ``time.monotonic()`` value: the wall-clock budget, model thinking included.
    """
    out = LoopOutcome()
    runtime.start(first_prompt, first_images)
    silent = 0
    while True:
        if time.monotonic() >= deadline:
            out.status, out.reason = "timeout", "timeout"
            break
        try:
            response = runtime.respond(deadline)
        except RuntimeFailure as failure:
            out.failure = failure
            if failure.kind in ("timeout", "budget") and time.monotonic() >= deadline - 1e-3:
                out.status, out.reason = "timeout", "timeout"
            else:
                out.status, out.reason = "planner_error", f"provider error mid-episode: {failure.kind}: {failure}"
            break
        out.requests += 1
        if on_request:
            on_request(response)
        if response.content:
            out.last_message = response.content
        if not response.tool_calls:
            silent += 1
            if silent >= MAX_SILENT_REPLIES:
                out.notes.append(f"the model answered {silent} times in a row without a tool call; loop ended")
                out.reason = "model stopped calling tools"
                break
            runtime.add_user_message(NO_TOOL_CALL_NUDGE.format(tool=tool_name))
            continue
        silent = 0
        if any(call.source != "tool_calls" for call in response.tool_calls):
            note = "tool calls were recognised in message text (server without a tool-call parser)"
            if note not in out.notes:
                out.notes.append(note)
        for call in response.tool_calls:
            if toolkit.finished:
                runtime.add_tool_result(call.id, call.name,
                                        '{"error": "the episode already finished; this call was not run"}', [])
                continue
            reply = toolkit.execute(call.name, call.arguments, call.parse_error, usage=response.usage,
                                    latency_s=response.latency_s)
            runtime.add_tool_result(call.id, call.name, reply.text, [png for _name, png in reply.images])
        if toolkit.finished:
            break
        if toolkit.turn_budget_exhausted and out.status == "completed":
            out.status, out.reason = "call_budget", f"call budget exhausted ({toolkit.cfg.max_turns})"
            # The model is told to call finish; one more response gives it the chance, then the loop ends.
            try:
                response = runtime.respond(deadline)
                out.requests += 1
                for call in response.tool_calls:
                    if call.name == "finish" and not toolkit.finished:
                        reply = toolkit.execute(call.name, call.arguments, call.parse_error, usage=response.usage,
                                                latency_s=response.latency_s)
                        runtime.add_tool_result(call.id, call.name, reply.text, [])
            except RuntimeFailure as failure:
                out.notes.append(f"no finish after the call budget: {failure.kind}: {failure}")
            break
    return out
