"""The agent loop: ask the model, execute its tool calls, send the results back, until it finishes.

Who must act on a failure decides what happens (STYLE-ANCHORS habit 4):
- the model's mistakes (unknown tool, arguments that are not JSON, a cell that raises) become a tool message and
  the loop goes on;
- a reply without a tool call is the model's final message and ends the loop (status ``completed``, no reason, a
  note), as the reference's agent runtimes end the episode when the model stops calling tools;
- infrastructure failures (the model server is unreachable after retries, the wall-clock budget is spent) end
  the loop with a status and a reason;
- our own bugs propagate, and the episode host still writes result.json in its ``finally``.

``finish`` ends the loop deterministically once its tool result has been recorded. Several tool calls in one
response run in order; calls after a ``finish`` are answered with an error and not run.
"""

from __future__ import annotations

import time

from pyrua_ros.agent.runtimes.base import LoopOutcome, RuntimeFailure


def run_loop(runtime, toolkit, *, deadline: float, first_prompt: str, first_images: list[bytes],
             on_request=None) -> LoopOutcome:
    """Drive ``runtime`` against ``toolkit`` until finish, budget end or an unrecoverable runtime failure.

    ``deadline`` is a ``time.monotonic()`` value: the wall-clock budget, model thinking included. The loop keeps
    its state to itself and returns one frozen :class:`LoopOutcome` when it ends.
    """
    status, reason, failure, requests, last_message = "completed", None, None, 0, ""
    notes: list[str] = []
    runtime.start(first_prompt, first_images)
    while True:
        if time.monotonic() >= deadline:
            status, reason = "timeout", "timeout"
            break
        try:
            response = runtime.respond(deadline)
        except RuntimeFailure as exc:
            failure = exc
            if exc.kind in ("timeout", "budget") and time.monotonic() >= deadline - 1e-3:
                status, reason = "timeout", "timeout"
            else:
                status, reason = "planner_error", f"provider error mid-episode: {exc}"
            break
        requests += 1
        if on_request:
            on_request(response)
        if response.content:
            last_message = response.content
        if not response.tool_calls:
            why = f" (finish_reason {response.finish_reason})" if response.finish_reason not in (None, "stop") else ""
            notes.append(f"the model replied without a tool call{why}; that final message ended the episode")
            break
        if any(call.source != "tool_calls" for call in response.tool_calls):
            note = "tool calls were recognised in message text (server without a tool-call parser)"
            if note not in notes:
                notes.append(note)
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
        if toolkit.turn_budget_exhausted and status == "completed":
            status, reason = "call_budget", f"call budget exhausted ({toolkit.cfg.max_turns})"
            # The model is told to call finish; one more response gives it the chance, then the loop ends.
            try:
                response = runtime.respond(deadline)
                requests += 1
                for call in response.tool_calls:
                    if call.name == "finish" and not toolkit.finished:
                        reply = toolkit.execute(call.name, call.arguments, call.parse_error, usage=response.usage,
                                                latency_s=response.latency_s)
                        runtime.add_tool_result(call.id, call.name, reply.text, [])
            except RuntimeFailure as exc:
                notes.append(f"no finish after the call budget: {exc}")
            break
    return LoopOutcome(status, reason, notes=tuple(notes), requests=requests, last_message=last_message,
                       failure=failure)
