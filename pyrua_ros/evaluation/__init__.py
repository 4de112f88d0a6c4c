"""Evaluation at scale: ``pyrualean eval`` runs an instance set (suites x tasks x seeds) with ``play``'s
agent options, many episodes at once, resumably, on local worker processes or Ray actors.

- ``instances.py``: instance sets (flags, files, named LIBERO / LIBERO-PRO sets) and each episode's run directory;
- ``manifest.py``: ``OUT/eval.json`` (options, code version, invocations) that makes a re-run resume safely;
- ``jobs.py``: the JSON that travels to workers; ``worker.py``: an episode host kept open, one ``play`` per job;
- ``local.py`` / ``ray_engine.py``: the two engines (``gather.py``: run directories packed on a Ray node, unpacked
  into ``OUT``); ``runner.py``: skipping, scheduling, retries, records;
- ``progress.py``: the live view; ``command.py``: the ``eval`` subcommand.
Reports (``summarize``, ``compare``) stay in ``agent/``: they read run records, whoever wrote them.
"""
