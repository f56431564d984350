"""RULER-style retrieval tasks hidden in the ladder's documents, each with a deterministic check.

Five kinds, after RULER (Hsieh et al., 2024), each spread over two depths or more of the
document:
- `multi-key`: several lockers with a code each; the question asks for two of them (a shallow
  and a deep one), so the other codes are distractors;
- `multi-value`: one depot with several batch codes at several depths; every one is asked;
- `variable-tracking`: a chain of assignments (`VAR A = 41234`, `VAR B = A`, ...) across the
  document beside a distracting chain; the answer names every variable of the asked value and
  none of the other chain;
- `common-words`: word lists at several depths where three made-up words recur most often;
- `aggregation`: a count of notes scattered through the document (one crate per note); the first
  number of the answer is the count.

Values, names and words are drawn per run and never occur in the shipped corpus, so only the
document can hold them. Each task's lines are placed by the document builder at their depths
(per cent of the body, by character).
"""

from __future__ import annotations

import random
import re
import string
from dataclasses import dataclass, field
from typing import Literal, get_args

from qualify.context.corpus import DIGIT_GAP, five_digits, fresh
from qualify.context.record import TaskCheck, TaskInfo

TaskKind = Literal["multi-key", "multi-value", "variable-tracking", "common-words", "aggregation"]
TASK_KINDS: tuple[TaskKind, ...] = get_args(TaskKind)
_NUMBER = re.compile(r"\b\d+\b")
_NAMES = "zero one two three four five six seven eight nine ten eleven twelve"
_WORDS = {w: n for n, w in enumerate(_NAMES.split())}
_NUMBER_WORD = re.compile(r"\b(" + "|".join(_WORDS) + r")\b", re.IGNORECASE)
_SYLLABLES = ("zor", "vel", "quin", "tar", "plix", "mun", "dra", "keth", "wob", "lys", "fen", "gru")


def _varname(rng: random.Random) -> str:
    return "".join(rng.choice(string.ascii_uppercase) for _ in range(4))


def _word(rng: random.Random) -> str:
    return "".join(rng.choice(_SYLLABLES) for _ in range(2))


def first_number(answer: str) -> int | None:
    """The first number an answer states, in digits or as a word (one to twelve)."""
    hits = [(m.start(), int(m.group(0))) for m in _NUMBER.finditer(answer)]
    hits += [(m.start(), _WORDS[m.group(1).lower()]) for m in _NUMBER_WORD.finditer(answer)]
    return min(hits)[1] if hits else None


class Task(TaskInfo):
    """One task: its lines at their depths, its question, and what a right answer holds."""

    def check(self, answer: str) -> TaskCheck:
        """Whether `answer` is right, with what it named and missed (deterministic)."""
        if self.kind == "aggregation":
            said = first_number(answer)
            return TaskCheck(passed=said == self.count, expected=self.count, said=said)
        if self.kind in ("multi-key", "multi-value"):
            flat = DIGIT_GAP.sub("", answer)
            missed = [v for v in self.expect if v not in flat]
            return TaskCheck(passed=not missed, missed=missed, expected=self.expect)
        if self.kind == "variable-tracking":
            words = set(re.findall(r"\b[A-Z]{4}\b", answer))
            missed = [v for v in self.expect if v not in words]
            wrong = [v for v in self.forbid if v in words]
            ok = not missed and not wrong
            return TaskCheck(passed=ok, missed=missed, wrong=wrong, expected=self.expect)
        words = set(re.findall(r"[a-z]+", answer.lower()))
        missed = [v for v in self.expect if v not in words]
        return TaskCheck(passed=not missed, missed=missed, expected=self.expect)


def _task(
    kind: TaskKind,
    lines: tuple[tuple[int, str], ...],  # (depth %, line without the content prefix)
    question: str,
    expect: tuple[str, ...],
    forbid: tuple[str, ...] = (),
    count: int | None = None,
) -> Task:
    """A task with every field of its record written."""
    depths = sorted({d for d, _ in lines})
    return Task(
        kind=kind,
        depths=depths,
        lines=list(lines),
        question=question,
        expect=list(expect),
        forbid=list(forbid),
        count=count,
    )


def multi_key(rng: random.Random, taken: set[str]) -> Task:
    depths = (15, 40, 65, 90)
    lockers = [f"L-{rng.randint(100, 999)}" for _ in depths]
    while len(set(lockers)) < len(lockers):
        lockers = [f"L-{rng.randint(100, 999)}" for _ in depths]
    values = [fresh(rng, five_digits, taken) for _ in depths]
    lines = tuple(
        (d, f"Note: the access code of locker {k} is {v}.")
        for d, k, v in zip(depths, lockers, values, strict=True)
    )
    asked = (0, 3)  # the shallowest and the deepest; the middle two are distractors
    q = (
        f"What are the access codes of locker {lockers[asked[0]]} and of locker "
        f"{lockers[asked[1]]}? Give both numbers."
    )
    return _task("multi-key", lines, q, tuple(values[i] for i in asked))


def multi_value(rng: random.Random, taken: set[str]) -> Task:
    depths = (20, 55, 85)
    values = [fresh(rng, five_digits, taken) for _ in depths]
    lines = tuple(
        (d, f"Note: one batch code of the Corwen depot is {v}.")
        for d, v in zip(depths, values, strict=True)
    )
    q = "List every batch code of the Corwen depot that the document gives."
    return _task("multi-value", lines, q, tuple(values))


def variable_tracking(rng: random.Random, taken: set[str]) -> Task:
    names = [fresh(rng, _varname, taken) for _ in range(5)]
    value, other = fresh(rng, five_digits, taken), fresh(rng, five_digits, taken)
    chain, decoy = names[:3], names[3:]
    lines = (
        (10, f"VAR {chain[0]} = {value}"),
        (30, f"VAR {decoy[0]} = {other}"),
        (50, f"VAR {chain[1]} = {chain[0]}"),
        (70, f"VAR {decoy[1]} = {decoy[0]}"),
        (92, f"VAR {chain[2]} = {chain[1]}"),
    )
    q = (
        f"Which variables (the VAR lines) hold the value {value}, directly or through another "
        "variable? Name all of them."
    )
    return _task("variable-tracking", lines, q, tuple(chain), tuple(decoy))


def common_words(rng: random.Random, taken: set[str]) -> Task:
    common = [fresh(rng, _word, taken) for _ in range(3)]
    rare = [fresh(rng, _word, taken) for _ in range(6)]
    bag = common * 4 + rare
    rng.shuffle(bag)
    thirds = [bag[i::3] for i in range(3)]
    lines = tuple(
        (d, "Word list: " + ", ".join(words)) for d, words in zip((25, 60, 88), thirds, strict=True)
    )
    q = "Across all the word lists in the document, which three words occur most often?"
    return _task("common-words", lines, q, tuple(common))


def aggregation(rng: random.Random, taken: set[str]) -> Task:
    n = rng.randint(3, 6)
    depths = sorted(rng.sample(range(12, 96, 6), n))
    lines = tuple((d, "Note: one more crate was loaded onto the barge Halden.") for d in depths)
    q = "How many crates were loaded onto the barge Halden in all? Answer with a number first."
    return _task("aggregation", lines, q, (), count=n)


_MAKERS = {
    "multi-key": multi_key,
    "multi-value": multi_value,
    "variable-tracking": variable_tracking,
    "common-words": common_words,
    "aggregation": aggregation,
}


@dataclass(frozen=True)
class Tasks:
    """The tasks of one rung (one document), drawn together so no value repeats."""

    items: tuple[Task, ...] = field(default_factory=tuple)

    @classmethod
    def draw(cls, rng: random.Random, kinds: list[TaskKind], avoid: set[str]) -> Tasks:
        taken = set(avoid)
        return cls(tuple(_MAKERS[k](rng, taken) for k in kinds))

    def lines(self) -> list[tuple[int, str]]:
        return [line for t in self.items for line in t.lines]


_NUMBERED = re.compile(r"(?m)^\s*(?:\*\*)?(\d{1,2})\s*[.):]")


def numbered(answer: str) -> dict[int, str]:
    """The answer's numbered parts (`1.`, `2)`, `3:` at a line start), by number."""
    marks = list(_NUMBERED.finditer(answer))
    out: dict[int, str] = {}
    for i, m in enumerate(marks):
        end = marks[i + 1].start() if i + 1 < len(marks) else len(answer)
        out.setdefault(int(m.group(1)), answer[m.end() : end])
    return out


def combined_question(first: str, tasks: Tasks) -> str:
    """Every question of the rung in one numbered list: the needles' first, then the tasks'."""
    qs = [first, *(t.question for t in tasks.items)]
    return (
        "Questions about the document above. Answer each on its own line, numbered like the "
        "question:\n" + "\n".join(f"{i}. {q}" for i, q in enumerate(qs, 1))
    )


def judge_combined(answer: str, tasks: Tasks) -> dict[str, TaskCheck]:
    """Each task judged on its numbered part of a combined answer (question i + 1), or on the
    whole answer when the model did not number it (`numbered` false)."""
    parts = numbered(answer)
    out: dict[str, TaskCheck] = {}
    for i, t in enumerate(tasks.items, 2):
        part = parts.get(i)
        out[t.kind] = t.check(answer if part is None else part)
        out[t.kind].numbered = part is not None
    return out
