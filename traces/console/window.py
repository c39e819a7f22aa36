"""Which calls of a run its page shows: page `number` of `pages`, PAGE_SIZE calls each
(traces/console/timeline.py)."""

from __future__ import annotations

from dataclasses import dataclass

# Rendering is what a long run's page costs: 200 calls with their attempts took 150–250 ms
# of template work on a 2-CPU machine, too near the 300 ms target under load; 100 take half.
PAGE_SIZE = 100


@dataclass(frozen=True)
class Window:
    """Which calls of the run the page shows: page `number` of `pages`."""

    number: int
    pages: int
    total: int

    @classmethod
    def of(cls, *, total: int, page: int | None, anchor: int | None) -> Window:
        pages = max(1, -(-total // PAGE_SIZE))
        if page is None:
            # By default, the page of the call the run stopped at (else the newest calls).
            page = (anchor // PAGE_SIZE + 1) if anchor is not None else pages
        return cls(number=min(max(page, 1), pages), pages=pages, total=total)

    @property
    def first(self) -> int:
        return (self.number - 1) * PAGE_SIZE

    @property
    def last(self) -> int:
        return min(self.first + PAGE_SIZE, self.total)

    @property
    def previous(self) -> int | None:
        return self.number - 1 if self.number > 1 else None

    @property
    def next(self) -> int | None:
        return self.number + 1 if self.number < self.pages else None
