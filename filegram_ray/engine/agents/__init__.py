"""Agents that drive an :class:`~filegram_ray.engine.session.EngineSession` (besides the persona simulator in
:mod:`filegram_ray.engine.simulator`): the LLM agent (:mod:`.llm_agent`), its prompts (:mod:`.prompts`), its tool-call
parser (:mod:`.toolcalls`), the model servers the stage may start (:mod:`.serve`) and the generate-stage actor body
that keeps many sessions in flight (:mod:`.worker`)."""
