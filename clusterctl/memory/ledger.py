"""A GPU's memory ledger: the phases a job's roles take turns in, each the sum of named terms."""

from __future__ import annotations

from dataclasses import dataclass

GIB = 1024**3


@dataclass(frozen=True)
class Term:
    """One thing held in GPU memory during a phase, and where its size comes from; a term
    that grows with the micro batch's tokens says how much per token."""

    what: str
    bytes: int
    source: str
    per_token: int = 0


@dataclass(frozen=True)
class Phase:
    """A stretch of the job (rollout, an update, a forward pass) and what each GPU holds.
    TOKENS: the micro batch at its largest (every sequence at the longest prompt and
    response, or a dynamic batch's token budget). PACKED: padding removed, so the real micro
    batch is as long as the data's sequences (SEQUENCES of them; 0: a dynamic batch, filled
    up to its budget as far as the data goes)."""

    name: str
    role: str
    terms: tuple[Term, ...]
    tokens: int = 0
    sequences: int = 0
    packed: bool = False

    @property
    def bytes(self) -> int:
        return sum(t.bytes for t in self.terms)

    @property
    def fixed(self) -> int:
        """What the phase holds whatever the data: every term that does not grow with tokens."""
        return sum(t.bytes for t in self.terms if not t.per_token)

    def tokens_that_fit(self, capacity: int) -> int:
        per_token = sum(t.per_token for t in self.terms)
        return max(0, capacity - self.fixed) // per_token if per_token else 0


@dataclass(frozen=True)
class Verdict:
    """The job's worst phase against the GPU: error (it cannot fit), warning (it fits only
    with shorter sequences than the longest allowed, or within the margin), ok."""

    level: str  # "error", "warning" or "ok"
    phase: Phase
    capacity: int
    why: str

    @property
    def percent(self) -> float:
        return 100.0 * self.phase.bytes / self.capacity


# The caching allocator's reserve: PyTorch keeps freed blocks cached for reuse ("memory
# reserved", docs/source/notes/cuda.rst, Memory management), releases them and retries before
# it raises out of memory, and still needs room beyond the live tensors (fragmentation, the
# allocation that failed). On a real H200 the reserve ran a median 11 % above allocated
# (tests/fixtures/memory/h200: peak_reserved over peak_alloc by phase), shrinking to 4 % at a
# step that filled the card: a plan within this fraction of the GPU is a warning, not ok.
NEAR_FRACTION = 0.90
LEVELS = {"error": 2, "warning": 1, "ok": 0}


def judge_phase(phase: Phase, capacity: int) -> Verdict:
    if phase.fixed > capacity:
        return Verdict("error", phase, capacity, "it does not fit whatever the sequences")
    if phase.bytes > capacity:
        fit = phase.tokens_that_fit(capacity)
        if phase.packed and phase.sequences:
            return Verdict(
                "warning",
                phase,
                capacity,
                f"it fits while the {phase.sequences} sequences of a micro batch average at "
                f"most {fit // phase.sequences} tokens (the longest allowed: "
                f"{phase.tokens // phase.sequences})",
            )
        if phase.packed:
            return Verdict(
                "warning",
                phase,
                capacity,
                f"it fits while a micro batch holds at most {fit} tokens (its token budget "
                f"allows {phase.tokens})",
            )
        return Verdict("error", phase, capacity, f"its micro batch holds {phase.tokens} tokens")
    # the rollout engine takes its share once, at start-up: no allocation grows into the margin
    if phase.bytes > NEAR_FRACTION * capacity and phase.role != "rollout":
        return Verdict("warning", phase, capacity, "within the allocator's margin")
    return Verdict("ok", phase, capacity, "")


def judge(phases: tuple[Phase, ...], capacity: int) -> Verdict:
    """The worst phase: the highest level, then the most memory."""
    verdicts = [judge_phase(p, capacity) for p in phases]
    return max(verdicts, key=lambda v: (LEVELS[v.level], v.phase.bytes))


def gib(n: float) -> str:
    return f"{n / GIB:.1f} GiB"


@dataclass(frozen=True)
class GpuGroup:
    """GPUs that hold the same roles and go through the same phases (verl: every GPU of the
    job; OpenRLHF: each role's own GPUs unless colocated)."""

    roles: tuple[str, ...]
    gpus: int
    phases: tuple[Phase, ...]


@dataclass(frozen=True)
class GpuPlan:
    """What each GPU of a job holds, phase by phase, judged against its memory. ANCHORS: for
    a phase, the framework settings it turns on, cheapest fix first (a finding points at the
    first the spec sets)."""

    groups: tuple[GpuGroup, ...]
    verdict: Verdict
    refusals: tuple[str, ...]  # what the rollout engine itself refuses at start-up
    fixes: tuple[str, ...]
    notes: tuple[str, ...]
    nodes: int
    gpus_per_node: int
    anchors: tuple[tuple[str, tuple[str, ...]], ...] = ()

    @property
    def phases(self) -> tuple[Phase, ...]:
        return tuple(p for g in self.groups for p in g.phases)

    @property
    def roles(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(r for g in self.groups for r in g.roles))

    def group_of(self, phase: Phase) -> GpuGroup:
        return next(g for g in self.groups if phase in g.phases)
