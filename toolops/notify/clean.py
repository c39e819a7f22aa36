"""Every value a notification carries, made safe for where it is written. An agent writes
the args that fill a call's title and facts, a downstream the errors a ticket quotes: any
of them may hold a line break, a control character or a receiver's markup.

- Mail: a value in a header (the subject, the combined subject) must be one line, or
  Django refuses the whole message (BadHeaderError); a value in the body must be one line
  too, or an arg starts a line of its own and reads as ours ("Bcc: …"). `one_line` and
  `header_value` remove control and format characters, turn line breaks into spaces and
  cap the length.
- Chat: a webhook's text is read by Slack (mrkdwn: `<!channel>`, `<@U123>`,
  `<http://evil|Approve now>`) and by Mattermost (Markdown: `@channel`, `[text](url)`).
  `slack` and `markdown` make that markup inert; `chat` does both to one line of text.

One module, so that a writer never cleans by hand and no two writers clean differently."""

from __future__ import annotations

import re
import unicodedata

# The longest subject ToolOps writes: mail clients show far less, and a header this long
# still folds within RFC 5322's line limit.
HEADER_MAX = 250
# A value laid out as a line of a message body (a fact, a sentence, a title).
LINE_MAX = 2000
ELLIPSIS = "…"
# Written in place of a line break: the words on either side stay apart.
_BREAKS = {"Zl", "Zp"}
# Removed outright: C0/C1 controls, format controls (bidi overrides, zero-width
# characters, the soft hyphen), and lone surrogates, which no mail or JSON encoder takes.
_DROPPED = {"Cc", "Cf", "Cs"}
# U+2060 WORD JOINER: invisible, and a word boundary to Mattermost's mention parser.
_JOINER = "\u2060"


def _cleaned_char(char: str) -> str:
    if char.isspace() or unicodedata.category(char) in _BREAKS:
        return " "
    return "" if unicodedata.category(char) in _DROPPED else char


def one_line(text: object, limit: int = LINE_MAX) -> str:
    """`text` as one line: line breaks, tabs and other white space as single spaces,
    control and format characters removed, at most `limit` characters (an ellipsis
    ends a value that was cut)."""
    raw = str(text)
    # Read at most a little past the cap: a value of megabytes costs no more than this.
    cleaned = "".join(_cleaned_char(c) for c in raw[: limit * 2 + 16])
    line = " ".join(cleaned.split())
    if len(line) > limit or len(raw) > limit * 2 + 16:
        line = line[: limit - 1].rstrip() + ELLIPSIS
    return line


def header_value(text: object, limit: int = HEADER_MAX) -> str:
    """A value for a mail header: one line, and short (a subject of at most `limit`)."""
    return one_line(text, limit)


def slack(text: str) -> str:
    """Slack's escaping: `&`, `<` and `>` as entities, so `<!channel>`, `<@U123>`,
    `<#C1>` and `<http://evil|Approve now>` show as typed and do nothing. Mattermost
    shows the entities as the characters, too."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


# "@channel", "@here", "@all", "@someone": a mention in Mattermost's Markdown.
_MENTION = re.compile(r"@(?=\w)")
# "[text](url)", "![image](url)" and "[text][ref]": a link the reader cannot see.
_LINK = re.compile(r"\](?=[(\[])")


def markdown(text: str) -> str:
    """Mattermost's Markdown made inert where it would act: a word joiner after `@` (the
    mention parser splits the word there, so `@channel` pings nobody and reads the
    same) and between `]` and `(` or `[` (no link or image forms: a URL in the text
    shows as itself). Emphasis is left: it can neither ping nor hide where a link goes,
    and a backslash, CommonMark's escape, would show as typed in Slack."""
    return _LINK.sub("]" + _JOINER, _MENTION.sub("@" + _JOINER, text))


def chat(text: object, limit: int = LINE_MAX) -> str:
    """A value for a chat message: one line, inert in both Slack and Mattermost."""
    return markdown(slack(one_line(text, limit)))
