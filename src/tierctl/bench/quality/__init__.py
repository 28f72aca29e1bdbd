"""The quality lane of ``bench ab`` and ``bench quality``: does B change what the model says?

- :mod:`.items`: texts and tasks, generated from a seed or read from JSONL;
- :mod:`.lane`: the A, B, A' passes and their comparison;
- :mod:`.stats`: Wilson intervals, McNemar's exact test, the noise-floor sign test, the
  cluster bootstrap of token agreement;
- :mod:`.report`: terminal, Markdown, JSON and the per-item agreement PNG.
"""
