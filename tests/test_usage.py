"""The one rule for "the nearest valid choices" (:func:`nsqviz.usage.nearest`) on the
names it serves -- interfaces, record names, display-filter fields, 16-hex message ids --
and the one-line usage error every sub-command prints."""

from __future__ import annotations

import pytest

from nsqviz.usage import nearest, usage_error, warn

IDS = ["18e9fb372532b7bf", "18e9fb372532b7c0", "18e9fb372532b7c1", "18e9fb372532b7c2",
       "18e9fb372532b7c3", "18e9fb372532b7c4", "18e9fb372532b7c5", "18e9fb372532b7c6",
       "18e9fb372532b7c7"]
"""The message ids of data/pubsub-pynsq.pcap: nsqd's ids of one topic, alike but for the
last characters."""

OTHER_IDS = ["0a1fd9c13b0e4f27", "5c2e07b9d1f86a43", "e93b5a0c7f2d1846"]
"""Ids of other brokers' messages: nothing in common with IDS but hex digits."""

FIELDS = ["frame.number", "nsq.channel", "nsq.command", "nsq.count", "nsq.msg.attempts",
          "nsq.msg.id", "nsq.topic", "tubemq.method"]


@pytest.mark.parametrize("value,choices,expected", [
    ("lo0", ["lo", "eth0", "ifb0", "ifb1"], ["lo"]),
    ("eht0", ["lo", "eth0", "ifb0", "wlp2s0"], ["eth0"]),
    ("comand", ["command", "frame", "error", "FrameTypeError"], ["command"]),
    ("e_bad_topc", ["E_BAD_TOPIC", "E_BAD_CHANNEL", "FrameTypeError"], ["E_BAD_TOPIC"]),
    ("nsq.chanel", FIELDS, ["nsq.channel"]),
])
def test_a_typo_in_a_short_name_finds_it_first(value, choices, expected):
    assert nearest(value, choices)[:len(expected)] == expected


def test_a_message_id_with_a_typo_or_a_missing_character_finds_its_neighbours():
    assert nearest("18e9fb372532b7bg", IDS + OTHER_IDS)[0] == "18e9fb372532b7bf"
    assert nearest("8e9fb372532b7c3", IDS + OTHER_IDS)[0] == "18e9fb372532b7c3"
    # equally near: in sorted order
    assert nearest("18e9fb372532b7c", IDS + OTHER_IDS) == IDS[1:4]
    assert nearest("18E9FB372532B7C5", IDS)[0] == "18e9fb372532b7c5"


def test_the_start_of_a_name_finds_the_names_that_start_so():
    assert nearest("18e9", IDS + OTHER_IDS) == IDS[:3]
    assert nearest("nsq.msg.what_was_it_called", FIELDS) == ["nsq.msg.attempts", "nsq.msg.id"]


def test_unrelated_message_ids_are_not_near():
    for other in OTHER_IDS:
        assert nearest(other, IDS, close_only=True) == []


def test_nothing_near_names_a_few_valid_choices_unless_only_near_ones_are_wanted():
    assert nearest("zzz", FIELDS) == FIELDS[:3]
    assert nearest("zzz", FIELDS, close_only=True) == []
    assert nearest("zzz", FIELDS, n=1) == ["frame.number"]
    assert nearest("anything", []) == []


def test_each_choice_is_named_once_in_one_spelling():
    assert nearest("comand", ["command", "command", "Command", "commands"]) == \
        ["Command", "commands"]
    assert nearest("x", {"b", "a", "c", "d"}) == ["a", "b", "c"]


def test_a_usage_error_is_one_line_naming_the_command_and_exit_2(capsys):
    assert usage_error("decode", "-f and --capture-tool go with -i IFACE") == 2
    warn("messages", "packet 3: a fragment")
    assert capsys.readouterr().err == ("nsqviz decode: -f and --capture-tool go with -i IFACE\n"
                                       "nsqviz messages: packet 3: a fragment\n")


def test_the_hint_names_the_nearest_choices_or_nothing_when_there_are_none():
    from nsqviz.usage import nearest_hint

    assert nearest_hint("comand", ["command", "frame", "flow"]) == " (nearest: command)"
    assert nearest_hint("anything", []) == ""
