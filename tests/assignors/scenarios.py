"""Seeded random group scenarios for comparing pysparklog's assignors with Kafka's.

The scenarios aim at what decides Kafka's answer beyond partition counts: topic and member names
whose Java hash codes collide in a ``HashMap``'s buckets (iteration order breaks ties), static
members, topics subscribed before they have metadata, and what members report owning: nothing, a
clean previous assignment (some of it from members that left), or conflicting claims in the same
or in different generations. Cooperative scenarios also come as follow-up rebalances, where each
member owns what the previous assignment gave it.
"""

from __future__ import annotations

import random
import string
from dataclasses import replace

from pysparklog.assignors import NO_GENERATION, Subscription, assignor_for, revoked_partitions
from pysparklog.structs import TopicPartition
from tests.assignors.kafka_assignors import Scenario
from tests.assignors.support import owned_by, with_owned

ASSIGNORS = ("range", "roundrobin", "sticky", "cooperative-sticky")
_NAME_CHARACTERS = string.ascii_lowercase + string.digits + "-_."
# Member and instance ids may hold any character: Java orders a surrogate pair (U+1F600) before
# U+FF21 and U+E000, Python the other way round.
_ID_CHARACTERS = _NAME_CHARACTERS + "\U0001f600\uff21\ue000\u00e9"


def _name(rng: random.Random, prefix: str, characters: str = _NAME_CHARACTERS) -> str:
    first = prefix or rng.choice(string.ascii_lowercase)  # never "-", which the driver reads as "no instance id"
    return first + "".join(rng.choices(characters, k=rng.randint(0, 7)))


def _unique_names(rng: random.Random, prefix: str, count: int, characters: str = _NAME_CHARACTERS) -> list[str]:
    names: dict[str, None] = {}
    while len(names) < count:
        names[_name(rng, prefix, characters)] = None
    return list(names)


def _claims(
    rng: random.Random, partitions: list[TopicPartition], members: list[str], generation: int
) -> dict[str, tuple[list[TopicPartition], int]]:
    """What each member says it owned, and in which generation."""
    style = rng.choice(("none", "previous", "previous", "conflicting"))
    claims: dict[str, tuple[list[TopicPartition], int]] = {member_id: ([], NO_GENERATION) for member_id in members}
    if style == "none" or not partitions:
        return claims
    if style == "previous":
        # A clean earlier assignment; owners that left took their partitions with them.
        owners = members + ["departed"] * rng.randint(0, 2)
        for partition in rng.sample(partitions, rng.randint(0, len(partitions))):
            owner = rng.choice(owners)
            if owner != "departed":
                claims[owner][0].append(partition)
        for member_id in members:
            if claims[member_id][0] or rng.random() < 0.7:
                claims[member_id] = (claims[member_id][0], rng.choice((generation, generation, generation - 1)))
        return claims
    for member_id in members:
        owned = rng.sample(partitions, rng.randint(0, min(len(partitions), 6)))
        claims[member_id] = (owned, rng.choice((NO_GENERATION, generation - 2, generation - 1, generation, generation)))
    return claims


def random_scenario(rng: random.Random, assignor: str) -> Scenario:
    """A group of 1-8 members over 1-7 topics of 0-9 partitions (see the module docstring)."""
    topics = _unique_names(rng, rng.choice(("", "topic", "t")), rng.randint(1, 7))
    partitions_per_topic = {topic: rng.choice((0, *range(1, 10))) if rng.random() < 0.9 else 1 for topic in topics}
    without_metadata = _unique_names(rng, "new-", rng.choice((0, 0, 0, 1)))
    id_characters = _ID_CHARACTERS if rng.random() < 0.1 else _NAME_CHARACTERS
    members = _unique_names(rng, rng.choice(("consumer-", "c", "")), rng.randint(1, 8), id_characters)
    instance_ids = iter(_unique_names(rng, "instance-", len(members), id_characters))
    equal = rng.random() < 0.5
    common = rng.sample(topics + without_metadata, rng.randint(1, len(topics) + len(without_metadata)))
    partitions = [
        TopicPartition(topic, number) for topic, count in partitions_per_topic.items() for number in range(count)
    ]
    generation = rng.randint(2, 9)
    claims = _claims(rng, partitions, members, generation)
    subscriptions = {}
    for member_id in members:
        chosen = common if equal else rng.sample(topics + without_metadata, rng.randint(1, len(topics)))
        owned, owned_generation = claims[member_id]
        subscriptions[member_id] = Subscription(
            tuple(chosen),
            tuple(owned),
            owned_generation,
            next(instance_ids) if rng.random() < 0.3 else None,
        )
    # Kafka's leader sees only topics with metadata; their order in the mapping must not matter.
    shuffled = list(partitions_per_topic.items())
    rng.shuffle(shuffled)
    return Scenario(assignor, dict(shuffled), subscriptions)


def follow_ups(scenario: Scenario, rebalances: int) -> list[Scenario]:
    """The rebalances after ``scenario``: each member owns what pysparklog assigned it, one generation on.

    Members that revoked nothing still rejoin here, so every round is a fresh comparison.
    """
    assignor = assignor_for(scenario.assignor)
    rounds: list[Scenario] = []
    current = dict(scenario.subscriptions)
    generation = max((subscription.generation for subscription in current.values()), default=NO_GENERATION)
    for _ in range(rebalances):
        assignment = assignor.assign(scenario.partitions_per_topic, current)
        if not revoked_partitions(owned_by(current), assignment) and rounds:
            break
        generation += 1
        current = with_owned(current, assignment, generation)
        rounds.append(replace(scenario, subscriptions=current))
    return rounds


def random_scenarios(seed: int, count: int) -> list[Scenario]:
    """``count`` scenarios spread over the four assignors, cooperative ones with their follow-ups."""
    rng = random.Random(seed)
    scenarios: list[Scenario] = []
    for index in range(count):
        scenario = random_scenario(rng, ASSIGNORS[index % len(ASSIGNORS)])
        scenarios.append(scenario)
        if scenario.assignor == "cooperative-sticky":
            scenarios.extend(follow_ups(scenario, 2))
    return scenarios[:count]


def moves_back_to_unsubscribed_owner(scenario: Scenario) -> bool:
    """Whether Kafka's general sticky path may give a partition back to a previous owner that no
    longer subscribes to its topic, where pysparklog deliberately departs from it.

    ``GeneralAssignmentBuilder.performReassignments`` moves a partition to the member that owned
    it in the latest earlier generation without checking that member's subscription: Kafka then
    assigns the partition to a non-subscriber, or throws a ``NullPointerException`` when that
    member's assignment is fixed. pysparklog moves it elsewhere (see :mod:`pysparklog.assignors.sticky`).
    """
    subscriptions = scenario.walked_subscriptions()
    if scenario.assignor not in ("sticky", "cooperative-sticky"):
        return False
    if len({frozenset(subscription.topics) for subscription in subscriptions.values()}) == 1:
        return False  # the constrained path has no previous owners
    max_generation = max(subscription.generation for subscription in subscriptions.values())
    previous: dict[TopicPartition, tuple[str, int]] = {}
    for member_id, subscription in subscriptions.items():
        if subscription.generation >= max_generation:
            continue
        for partition in subscription.owned_partitions:
            if partition not in previous or subscription.generation > previous[partition][1]:
                previous[partition] = (member_id, subscription.generation)
    return any(
        scenario.partitions_per_topic.get(partition.topic, 0) > 0 and partition.topic not in subscriptions[owner].topics
        for partition, (owner, _) in previous.items()
    )
