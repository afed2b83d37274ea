"""FileGramBench construction (reference §9): item schema, one builder per sub-task, bank, bench stage, answerers.

Contract for the evaluate stage (``bench/items.parquet``, one row per item, all strings unless noted):

=================== =========================================================================================
question_id         ``<SubTask>-<5 digits>`` (e.g. ``TraceDis-00042``), stable for a seed
track / sub_track   ``T1_understanding`` … ``T4_multimodal`` / ``AttrRec`` … ``FileGrd`` (reference §9.1)
sub_class           family inside the sub-task (``dim:C``, ``attr:tone``, ``k:6``, ``AttrRec/dim:A`` for FileGrd)
channel             procedural | semantic | episodic (reference §9.5)
setting             text | multimodal (FileGrd: outputs given as rendered derivatives)
profile_id          the user the question is about ("" for BehavFP, where it is the answer, and TraceDis)
input_trajectories  JSON list of trajectory ids (= context.trajectories)
question            public question text
choices             JSON list of option texts (letters A, B, … by position); ``[]`` for open-ended ProfRec
n_choices           int
correct             always "" (ground truth is in ``bench/answers_key.parquet``)
context             JSON ``{kind, trajectories, labels, held_out}`` (:class:`~filegram_ray.bench.schema.ContextSpec`)
metadata            JSON, evaluator-facing (ProfRec: attribute, value_space, rubric, vagueness_rule)
=================== =========================================================================================

``context.kind``: ``all_trajectories`` | ``single_trajectory`` | ``held_out`` | ``interleaved_pair`` (merge the two
event streams by timestamp, tag events with the labels "User 1"/"User 2") | ``sessions_with_impostor`` |
``baseline_plus_session`` (last entry = session in question). A method sees trajectories only under
``context.labels`` ("Session T-12"), never their ids; :meth:`Item.public_view` is the answerer's whole input.

``bench/answers_key.parquet``: question_id, correct (letter, or reference value for open-ended), correct_text,
facts (JSON), distractor_profiles (JSON list).

COUNTS (20 profiles × 32 tasks, 100 perturbed sessions; reference §9.1 in brackets): AttrRec 320 [326], BehavFP
540 [560], ProfRec 320, BehavInf 560, TraceDis 1,134, AnomDet 815, ShiftAna 288, FileGrd 550 [550] when the render
stage covered the run (``inputs.rendered_trajectories``); VisGrd pending (needs real recordings). Each builder module's docstring explains its
rule and any gap; other profile/task sets scale by profiles × tasks / (20 × 32) (ShiftAna: 2.88 per perturbed
session; ProfRec: one per profile attribute).
"""
