"""Event schema: constants, the upstream events.json layout round trip, clear parse errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from filegram_ray.schema.events import (
    EVENT_MODELS,
    KEPT_TYPES,
    LEAKAGE_FIELDS,
    SIMULATION_TYPES,
    EventParseError,
    FileRead,
    parse_event,
    read_events_json,
    write_events_json,
)

FIXTURE = Path(__file__).parent / "fixtures" / "upstream_events.json"


def test_type_sets_match_reference_counts():
    assert len(KEPT_TYPES) == 12 and len(SIMULATION_TYPES) == 10 and len(LEAKAGE_FIELDS) == 3
    assert not set(KEPT_TYPES) & set(SIMULATION_TYPES)
    assert set(EVENT_MODELS) == set(KEPT_TYPES) | set(SIMULATION_TYPES)


def test_fixture_round_trips_byte_for_byte():
    data = FIXTURE.read_bytes()
    events = read_events_json(data)
    assert {e.event_type for e in events} == set(EVENT_MODELS)  # fixture covers all 22 types
    assert write_events_json(events) == data
    assert write_events_json(read_events_json(FIXTURE)) == data  # path form too


def test_parsed_fields_keep_types_and_units():
    events = read_events_json(FIXTURE)
    read = next(e for e in events if isinstance(e, FileRead))
    assert read.view_range == [1, 42] and read.revisit_interval_ms is None
    assert isinstance(read.timestamp, float)
    legacy = [e for e in events if e.event_type == "file_write"][1]
    assert legacy.media_ref == "0001_write.md"  # legacy string media_ref (ref §2.2) is accepted
    first = json.loads(FIXTURE.read_text(encoding="utf-8"))[0]
    assert list(first)[:8] == ["event_id", "event_type", "timestamp", "session_id", "profile_id", "message_id",
                               "model_provider", "model_name"]


def test_filtered_events_without_leakage_fields_still_parse():
    raw = json.loads(FIXTURE.read_text(encoding="utf-8"))
    stripped = [{k: v for k, v in e.items() if k not in LEAKAGE_FIELDS} for e in raw]
    out = json.loads(write_events_json(read_events_json(json.dumps(stripped).encode())))
    assert all(not set(LEAKAGE_FIELDS) & set(e) for e in out)


@pytest.mark.parametrize("mutate, needle", [
    (lambda e: e.update(event_type="todo_created"), "event[3]: field 'event_type': unknown event type 'todo_created'"),
    (lambda e: e.update(event_type="bogus"), "unknown event type 'bogus'"),
    (lambda e: e.pop("event_type"), "event[3]: missing field 'event_type'"),
    (lambda e: e.update(iteration_number="one"), "field 'iteration_number'"),
    (lambda e: e.update(surprise=1), "field 'surprise'"),
    (lambda e: e.pop("timestamp"), "field 'timestamp'"),
])
def test_bad_event_errors_name_index_and_field(mutate, needle):
    raw = json.loads(FIXTURE.read_text(encoding="utf-8"))
    raw[3] = {**raw[2]}  # an iteration_start
    mutate(raw[3])
    with pytest.raises(EventParseError) as ei:
        read_events_json(json.dumps(raw).encode())
    assert needle in str(ei.value) and "<bytes>" in str(ei.value)


def test_error_names_the_file(tmp_path):
    p = tmp_path / "events.json"
    p.write_text('{"not": "an array"}')
    with pytest.raises(EventParseError, match=str(p)):
        read_events_json(p)
    with pytest.raises(EventParseError, match="expected a JSON object"):
        parse_event(["x"], 0)  # type: ignore[arg-type]
