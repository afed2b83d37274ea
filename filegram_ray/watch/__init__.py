"""Watch your own folders: a Linux (inotify, via watchdog) recorder of real file activity in the engine's event
schema, with privacy controls, crash-safe session logs and an importer into the Real-World setting.

Modules: :mod:`.config` (settings), :mod:`.privacy` (what is never recorded, redaction), :mod:`.journal` (the
append-only session log), :mod:`.store` (the store folder), :mod:`.recorder` (notifications → events),
:mod:`.observer` (the running watcher), :mod:`.forget` (``--forget PATH``), :mod:`.export` (sessions →
trajectories), :mod:`.cli` (``filegram watch``).
"""
