"""The agent layer: what turns a model (or a recorded script) into robot episodes, with no rclpy import.

Modules: ``prompt`` (arm contracts, the API reference rendered from the live ``robo`` class, knowledge and the
task card joined into one prompt), ``records`` (typed run records: ``result.json``, ``tool_turns.json``,
``card.json``), ``summarize`` and ``compare`` (tables, aggregates and strictly paired comparisons of run
directories). The cell loop, runtimes and the sandboxed kernel (``kernel/``) live here too.
"""
