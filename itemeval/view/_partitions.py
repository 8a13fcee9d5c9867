"""Where the viewer's rows are: a partition and its fragments by the codes the index keeps."""

from __future__ import annotations

from dataclasses import dataclass

from itemeval.storage import Location


@dataclass(frozen=True)
class Where:
    """A partition: where it is and its fragment names by ordinal (`FRAG` values)."""

    condition_id: str
    location: Location
    fragments: list[str]
