"""Fuzzing the request decoder: for every API the endpoint serves when the test runs, at each version served,
valid requests built by hypothesis from kio's dataclasses are framed, then sent whole, truncated and mutated, each
on a connection of its own that the test half-closes after sending.

What is checked, frame by frame:

- **Truncated frames** (the frame cut at a sampled point, its size prefix either saying the cut length or still
  the whole length with the connection ending early): the endpoint answers or closes the connection within
  ``HANG_S``, and writes nothing to the log directory (its files, sizes and modification times compared before
  and after every truncated frame of a request).
- **Mutated frames** (bit flips, bytes overwritten with random or extreme values where lengths of arrays and
  strings sit, a 16- or 32-bit window set to -1, 0x7FFF.. or 0x8000.., another served API key and version
  written over the header, the size prefix made wrong): the endpoint answers or closes within ``HANG_S``. A
  mutated frame that still decodes into a valid request may act on it (a produce may append, a topic may be
  created), so the log directory is not compared then; only a request a broker also holds (a Fetch's long poll,
  JoinGroup, SyncGroup) may keep its connection past ``HANG_S``, waiting out a timeout the mutation made long.
- **Valid frames** pass the bounds walk that guards kio's decoder (``pysparklog.endpoint.bounds``), which would
  otherwise close their connections unnoticed.
- **After every frame**: the endpoint still answers ApiVersions on a connection kept open for the purpose, and it
  logged no unexpected error (a handler that raises instead of answering a Kafka error code is a finding).

SaslAuthenticate is fuzzed on an endpoint with SASL on, after a valid SaslHandshake on the same connection, so
that its PLAIN and SCRAM parsers see the mutated tokens; every other API on an endpoint without SASL.

Seeded and replayable: ``PYSPARKLOG_FUZZ_SEED`` (default 23) fixes every draw; ``PYSPARKLOG_FUZZ_EXAMPLES``
(default 3) is the number of requests per API version, each sent whole and as ``CUTS`` truncations and
``MUTATIONS`` mutations (a longer run: ``PYSPARKLOG_FUZZ_EXAMPLES=50``). The frames sent and their rate are
printed at the end of the run.
"""

from __future__ import annotations

import logging
import os
import random
import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.api_versions.v3.response import ApiVersionsResponse
from kio.schema.errors import ErrorCode
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest
from kio.schema.types import TopicName
from kio.static.primitive import Records, i32Timedelta

from pysparklog.endpoint import Endpoint, EndpointConfig
from pysparklog.endpoint.apis import served
from pysparklog.endpoint.bounds import check_bounds
from pysparklog.endpoint.protocol import decode_header, message
from pysparklog.endpoint.security import MECHANISMS, add_user
from pysparklog.storage.log_dir import LogDirectory
from pysparklog.storage.records.arrow_records import BatchSettings, encode_arrow
from tests.endpoint.kafka_wire import SIZE, WireClient

SEED = int(os.environ.get("PYSPARKLOG_FUZZ_SEED", "23"))
EXAMPLES = int(os.environ.get("PYSPARKLOG_FUZZ_EXAMPLES", "3"))
CUTS = 6
MUTATIONS = 10
#: How long a frame may go unanswered and its connection open before the endpoint counts as hung.
HANG_S = 5.0
TOPIC = "fuzzed"
FETCH, JOIN_GROUP, SYNC_GROUP = 1, 11, 14
SASL_AUTHENTICATE = 36
#: APIs whose requests may rightly wait past HANG_S, as a broker's would: a long poll waits its (mutated) max_wait,
#: a JoinGroup the group's rebalance timeout, a SyncGroup its leader's assignment.
LONG_POLLS = frozenset({FETCH, JOIN_GROUP, SYNC_GROUP})
SERVED_VERSIONS = sorted(
    (api.api_key, version) for api in served().values() for version in range(api.min_version, api.max_version + 1)
)


def _valid_batches() -> list[bytes]:
    """v2 record batches as a producer sends them, so that some produced requests append for real."""
    table = pa.table({"value": pa.array([b"fuzz", b"", b"x" * 100], pa.binary())})
    return [bytes(encoded.data) for encoded in encode_arrow(table, BatchSettings())]


# Requests hypothesis builds from kio's types: record sets either a real batch or random bytes, topic names mostly
# the topic that exists, and durations short, so that a valid long poll or produce timeout ends within HANG_S.
st.register_type_strategy(Records, st.one_of(st.sampled_from(_valid_batches()), st.binary(max_size=64)).map(Records))
st.register_type_strategy(TopicName, st.one_of(st.just(TOPIC), st.text(max_size=12)).map(TopicName))
st.register_type_strategy(
    i32Timedelta, st.integers(0, 200).map(lambda ms: i32Timedelta.parse(timedelta(milliseconds=ms)))
)


@dataclass
class Tally:
    """Frames sent and the time spent sending them and waiting for their outcome, printed at the end."""

    frames: int = 0
    seconds: float = 0.0
    answered: int = 0
    closed: int = 0
    held: int = 0


@dataclass
class Target:
    """An endpoint under fuzz, its log directory and the connection that checks it still answers."""

    endpoint: Endpoint
    log_dir: Path
    probe: WireClient
    sasl: bool


@pytest.fixture(scope="module")
def tally(request: pytest.FixtureRequest) -> Iterator[Tally]:
    counted = Tally()
    yield counted
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    if reporter is not None and capture is not None and counted.frames:
        with capture.global_and_fixture_disabled():
            reporter.write_line(
                f"\nfuzz (seed {SEED}, {EXAMPLES} example(s) per version, {len(SERVED_VERSIONS)} API versions): "
                f"{counted.frames} frames in {counted.seconds:.1f} s, {counted.frames / counted.seconds:.0f} frames/s; "
                f"{counted.answered} answered, {counted.closed} closed, {counted.held} long polls held"
            )


def _start(tmp: Path, sasl: bool) -> tuple[Endpoint, WireClient]:
    log_dir = LogDirectory(str(tmp / "logs"))
    log_dir.topics.create(TOPIC, 2)
    users = tmp / "users.txt"
    if sasl:
        add_user(users, "alice", "alice-secret", iterations=4096)
    config = EndpointConfig(
        port=0, sasl_users=str(users) if sasl else None, failed_authentication_delay_ms=0, max_request_bytes=1 << 20
    )
    endpoint = Endpoint(log_dir, config).start()
    return endpoint, WireClient(endpoint.bootstrap, timeout=HANG_S)


@pytest.fixture(scope="module")
def targets(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[bool, Target]]:
    started: dict[bool, Target] = {}
    try:
        for sasl in (False, True):
            tmp = tmp_path_factory.mktemp("sasl" if sasl else "plain")
            endpoint, probe = _start(tmp, sasl)
            started[sasl] = Target(endpoint, tmp / "logs", probe, sasl)
        yield started
    finally:
        for target in started.values():
            target.probe.close()
            target.endpoint.stop()


#: Files the endpoint writes on its own schedule, whatever clients send: the registry of endpoints (the groups
#: family's), whose lease each endpoint renews on a timer.
RENEWED_ON_A_TIMER = frozenset({"pysparklog-endpoints.json"})


def _files(log_dir: Path) -> dict[str, tuple[int, int]]:
    """Every file of the log directory with its size and modification time, but those renewed on a timer (and the
    temporary file each renewal is written through)."""
    return {
        str(path.relative_to(log_dir)): (path.stat().st_size, path.stat().st_mtime_ns)
        for path in log_dir.rglob("*")
        if path.is_file() and not path.name.startswith(tuple(RENEWED_ON_A_TIMER))
    }


def _truncations(frame: bytes, rng: random.Random) -> list[bytes]:
    """The frame cut at sampled points: every second one with its size prefix saying the cut length, the others
    still saying the whole length (the connection then ends early)."""
    body = frame[SIZE.size :]
    cuts = sorted(rng.sample(range(len(body)), min(CUTS, len(body))))
    return [(SIZE.pack(cut) if index % 2 == 0 else frame[: SIZE.size]) + body[:cut] for index, cut in enumerate(cuts)]


EXTREMES = (b"\xff\xff", b"\x7f\xff", b"\x80\x00", b"\xff\xff\xff\xff", b"\x7f\xff\xff\xff", b"\x80\x00\x00\x00")


def _mutations(frame: bytes, rng: random.Random) -> list[bytes]:
    """The frame mutated ``MUTATIONS`` ways, as described in the module's docstring."""
    body = bytearray(frame[SIZE.size :])
    mutated: list[bytes] = []
    for index in range(MUTATIONS):
        copy = bytearray(body)
        kind = index % 5
        if kind == 0:  # bit flips
            for _ in range(rng.randint(1, 4)):
                copy[rng.randrange(len(copy))] ^= 1 << rng.randrange(8)
        elif kind == 1:  # random bytes overwritten
            at = rng.randrange(len(copy))
            copy[at : at + rng.randint(1, 4)] = rng.randbytes(rng.randint(1, 4))
        elif kind == 2:  # an extreme value where a length, count or offset may sit (past the API key and version)
            extreme = rng.choice(EXTREMES)
            at = rng.randrange(4, max(5, len(copy) - len(extreme) + 1))
            copy[at : at + len(extreme)] = extreme
        elif kind == 3:  # another served API and version over the header: the body read as another request
            api_key, version = rng.choice(SERVED_VERSIONS)
            copy[0:4] = api_key.to_bytes(2, "big") + version.to_bytes(2, "big")
        else:  # a wrong size prefix, shorter or longer than the frame (the connection then ends early)
            size = max(0, len(copy) + rng.choice((-1, 1)) * rng.randint(1, 8))
            mutated.append(SIZE.pack(size) + bytes(copy))
            continue
        mutated.append(SIZE.pack(len(copy)) + bytes(copy))
    return mutated


def _send(target: Target, frame: bytes, prelude: bytes, tally: Tally) -> str:
    """Send ``prelude`` (a handshake) and ``frame`` on a new connection, half-close it and read until the endpoint
    closes it: "answered", "closed" (nothing answered) or "held" (a long poll still waiting at HANG_S).

    Fails: the endpoint kept a connection open past HANG_S for a frame whose header names no long poll (the API
    key as sent: a mutation may have made another request of it).
    """
    api_key = int.from_bytes(frame[SIZE.size : SIZE.size + 2], "big", signed=True)
    started = time.monotonic()
    client = WireClient(target.endpoint.bootstrap, timeout=HANG_S)
    outcome = "closed"
    try:
        client.send_raw(prelude + frame)
        client.sock.shutdown(socket.SHUT_WR)
        while True:
            try:
                answer = client.receive_frame()
            except TimeoutError:
                assert api_key in LONG_POLLS, f"API {api_key}: no answer and no close within {HANG_S} s"
                outcome = "held"
                break
            if answer is None:
                break
            outcome = "answered"
    except (BrokenPipeError, ConnectionResetError):
        outcome = "closed"  # closed while the frame was still being sent
    finally:
        client.close()
        tally.frames += 1
        tally.seconds += time.monotonic() - started
        setattr(tally, outcome, getattr(tally, outcome) + 1)
    return outcome


def _still_answers(target: Target) -> None:
    request = ApiVersionsRequest(client_software_name="fuzz-probe", client_software_version="1")
    response: ApiVersionsResponse = target.probe.request(request, ApiVersionsResponse)
    assert response.error_code == ErrorCode.none


def _no_unexpected_errors(caplog: pytest.LogCaptureFixture) -> None:
    errors = [record for record in caplog.records if record.levelno >= logging.ERROR]
    assert not errors, "\n".join(record.getMessage() + (record.exc_text or "") for record in errors)


@pytest.mark.parametrize(("api_key", "version"), SERVED_VERSIONS, ids=[f"{k}v{v}" for k, v in SERVED_VERSIONS])
def test_truncated_and_mutated_frames_cost_a_connection_at_most(
    api_key: int,
    version: int,
    targets: dict[bool, Target],
    tally: Tally,
    caplog: pytest.LogCaptureFixture,
) -> None:
    request_type = message(api_key, version).request_type
    target = targets[api_key == SASL_AUTHENTICATE]

    @seed(SEED * 100_000 + api_key * 100 + version)
    @settings(
        max_examples=EXAMPLES,
        database=None,
        deadline=None,
        phases=[Phase.generate],  # no shrinking: a failing frame may cost HANG_S each try; the example is printed
        suppress_health_check=list(HealthCheck),
    )
    @given(request=st.from_type(request_type), mutation_seed=st.integers(0, 2**32 - 1))
    def fuzz(request: Any, mutation_seed: int) -> None:
        rng = random.Random(mutation_seed)
        wire = WireClient.__new__(WireClient)  # only its framing: each frame goes on a connection of its own
        wire.correlation_id = rng.randrange(2**30)
        prelude = b""
        if target.sasl:
            prelude = wire.frame(SaslHandshakeRequest(mechanism=rng.choice(MECHANISMS)))
        frame = wire.frame(request)
        # The walk that guards kio's decoder must pass every valid request (it refuses by closing the connection,
        # which the checks below would take as a fine answer to a valid frame).
        check_bounds(request_type, frame[SIZE.size :], decode_header(frame[SIZE.size :], request.__flexible__)[1])
        before = _files(target.log_dir)
        for truncated in _truncations(frame, rng):
            _send(target, truncated, prelude, tally)
            _still_answers(target)
            after = _files(target.log_dir)
            changed = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
            assert not changed, f"a truncated frame wrote to the log directory: {changed}"
        for whole_or_mutated in [frame, *_mutations(frame, rng)]:
            _send(target, whole_or_mutated, prelude, tally)
            _still_answers(target)
        _no_unexpected_errors(caplog)

    with caplog.at_level(logging.WARNING, logger="pysparklog.endpoint"):
        fuzz()
