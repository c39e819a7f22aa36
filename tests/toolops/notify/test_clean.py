"""Values made safe for where a notification writes them (toolops/notify/clean.py): one
line for a mail header or a body line, inert markup for Slack and Mattermost."""

from __future__ import annotations

import pytest

from toolops.notify.clean import HEADER_MAX, chat, header_value, markdown, one_line, slack

BREAKS = ["\r\n", "\n", "\r", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029"]
# Characters a mail client or a terminal acts on, or that hide what a line says.
INVISIBLE = ["\x00", "\x1b", "\x7f", "\x9b", "\u200b", "\u200e", "\u202e", "\u2066", "\ufeff"]


@pytest.mark.parametrize("char", BREAKS + ["\t"])
def test_a_line_break_or_tab_becomes_one_space(char: str) -> None:
    assert one_line(f"dave{char}Bcc: x@evil.example") == "dave Bcc: x@evil.example"


@pytest.mark.parametrize("char", INVISIBLE)
def test_a_control_or_format_character_is_removed(char: str) -> None:
    assert one_line(f"cus{char}_42") == "cus_42"


def test_a_lone_surrogate_no_encoder_takes_is_removed() -> None:
    assert one_line("cus_\ud800 42").encode() == b"cus_ 42"


def test_white_space_is_collapsed_and_trimmed_and_text_kept() -> None:
    assert one_line("  Charge 89.00 EUR\r\n\r\n  to   Zoë 👩‍💻 ") == "Charge 89.00 EUR to Zoë 👩💻"
    assert one_line(42) == "42"


def test_a_header_value_is_capped_with_an_ellipsis() -> None:
    value = header_value("Approval waiting: " + "x" * 1000)

    assert len(value) == HEADER_MAX and value.endswith("…")
    assert header_value("Short subject") == "Short subject"


def test_a_value_of_megabytes_is_read_only_up_to_past_the_cap() -> None:
    value = one_line("\n" * 5_000_000 + "tail", limit=100)

    assert value == "…"


def test_slack_control_sequences_show_as_typed() -> None:
    assert slack("<!channel> <http://evil|Approve now> <@U123> a & b") == (
        "&lt;!channel&gt; &lt;http://evil|Approve now&gt; &lt;@U123&gt; a &amp; b"
    )


@pytest.mark.parametrize("mention", ["@channel", "@here", "@all", "@rita", "@Channel"])
def test_a_mattermost_mention_is_split_by_a_word_joiner(mention: str) -> None:
    assert markdown(f"hi {mention}!") == f"hi @\u2060{mention[1:]}!"


@pytest.mark.parametrize(
    ("typed", "sent"),
    [
        ("[Approve now](http://evil)", "[Approve now]\u2060(http://evil)"),
        ("![x](http://evil/pixel.png)", "![x]\u2060(http://evil/pixel.png)"),
        ("[Approve now][1]", "[Approve now]\u2060[1]"),
    ],
)
def test_a_markdown_link_or_image_does_not_form(typed: str, sent: str) -> None:
    assert markdown(typed) == sent


def test_chat_is_one_line_escaped_for_both() -> None:
    assert chat("<!here>\n[Approve](http://evil) @all") == (
        "&lt;!here&gt; [Approve]\u2060(http://evil) @\u2060all"
    )
    assert chat("Charge 89.00 EUR to customer cus_42") == "Charge 89.00 EUR to customer cus_42"
