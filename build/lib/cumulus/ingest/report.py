"""What an ingest batch did, for logs, the CLI summary and callers (the engine reads
`batch_id` and `epoch` to apply the batch)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from cumulus.store.files import FileEntry


@dataclass
class RelationCounts:
    inserts: int = 0
    deletes: int = 0
    rejected: Counter = field(default_factory=Counter)  # reason -> rows

    @property
    def accepted(self) -> int:
        return self.inserts + self.deletes


@dataclass
class IngestReport:
    source: str
    source_id: int
    epoch: int | None = None
    batch_id: str | None = None
    files: list[FileEntry] = field(default_factory=list)
    relations: dict[str, RelationCounts] = field(default_factory=dict)
    recovered: list[str] = field(default_factory=list)  # batches rolled back first
    already_taken: list[str] = field(default_factory=list)  # files an earlier batch took from the same path
    committed: bool = False  # events and manifest written
    failed: str | None = None  # why the batch was refused (error threshold)
    seconds: float = 0.0

    @property
    def accepted(self) -> int:
        return sum(r.accepted for r in self.relations.values())

    @property
    def rejected(self) -> int:
        return sum(sum(r.rejected.values()) for r in self.relations.values())

    @property
    def error_rate(self) -> float:
        total = self.accepted + self.rejected
        return self.rejected / total if total else 0.0

    def relation(self, name: str) -> RelationCounts:
        return self.relations.setdefault(name, RelationCounts())

    def relation_rows(self) -> tuple[list[str], list[tuple]]:
        """The per-relation summary: accepted and rejected rows, rejections by reason."""
        columns = ["relation", "inserts", "deletes", "rejected", "reasons"]
        rows = []
        for name in sorted(self.relations):
            counts = self.relations[name]
            reasons = ", ".join(f"{r} {n}" for r, n in sorted(counts.rejected.items()))
            rows.append((name, counts.inserts, counts.deletes, sum(counts.rejected.values()), reasons))
        return columns, rows

    def file_rows(self) -> tuple[list[str], list[tuple]]:
        columns = ["file", "status", "accepted", "rejected", "checksum"]
        rows = [
            (f.path, f.status, f.rows_accepted, f.rows_rejected, (f.checksum or "")[:12])
            for f in self.files
        ]
        return columns, rows

    def headline(self) -> str:
        where = f"epoch {self.epoch}, source {self.source} (priority {self.source_id})"
        if self.failed:
            return f"{where}: batch refused: {self.failed}"
        new = sum(1 for f in self.files if f.status == "ingested")
        dups = sum(1 for f in self.files if f.status == "duplicate")
        text = (
            f"{where}: {self.accepted} rows accepted, {self.rejected} rejected "
            f"from {new} new file(s)"
        )
        if dups:
            text += f"; {dups} duplicate file(s) skipped"
        if self.already_taken:
            text += f"; {len(self.already_taken)} file(s) taken before"
        if self.batch_id and self.committed:
            text += f"; batch {self.batch_id}"
        return text + f" ({self.seconds:.1f} s)"
